package spec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDecodeBackends(t *testing.T) {
	lambda := func() *Spec {
		s := defaults(floatX)
		s.Backend = Backend{
			Type: Lambda, Function: "hpsearch-trainer", Region: "eu-west-1", Architecture: "x86_64", Concurrency: 8,
			MemoryMB: 2048, PricePerGBSecond: LambdaX86PricePerGBSecond, PricePerRequest: DefaultPricePerRequest, MaxRuntime: 5 * time.Minute,
		}
		s.Checkpoint = defaultCheckpoint
		s.Checkpoint.Store = "s3://bucket/ckpt"
		return s
	}()
	cloudrun := func() *Spec {
		s := defaults(floatX)
		s.Backend = Backend{
			Type: CloudRun, Project: "my-project", Region: "europe-west1", Job: "hpsearch-trainer", VCPU: 2, GPUs: 1,
			MemoryMB: 16384, PricePerGBSecond: CloudRunPricePerGBSecond, PricePerVCPUSecond: CloudRunPricePerVCPUSecond,
			PricePerGPUSecond: CloudRunPricePerGPUSecond, MaxRuntime: CloudRunMaxRuntime,
		}
		s.Checkpoint = defaultCheckpoint
		s.Checkpoint.Store = "s3://bucket/ckpt"
		return s
	}()
	for _, tc := range []validCase{
		{"lambda", minimal("  x: {type: float, min: 0, max: 1}") + lines(
			"backend: {type: lambda, function: hpsearch-trainer, region: eu-west-1, architecture: x86_64, concurrency: 8, memory_mb: 2048, max_runtime: 5m}",
			"checkpoint: {store: s3://bucket/ckpt}"), lambda},
		{"cloudrun", minimal("  x: {type: float, min: 0, max: 1}") + lines(
			"backend: {type: cloudrun, project: my-project, region: europe-west1, job: hpsearch-trainer, vcpu: 2, gpus: 1, memory_mb: 16384}",
			"checkpoint: {store: s3://bucket/ckpt}"), cloudrun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode("space.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decode =\n%#v\nwant\n%#v", got.Backend, tc.want.Backend)
			}
			enc, err := Encode(got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Decode("encoded.yaml", enc)
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip: %v\n%s", err, enc)
			}
		})
	}
}

func TestDecodeBackendErrors(t *testing.T) {
	base := minimal("  x: {type: float, min: 0, max: 1}")
	for _, tc := range []struct{ name, yaml, want string }{
		{"lambda needs a function and an s3 store", base + "backend: {type: lambda}\n",
			"space.yaml:7:10: backend is missing required key \"function\"; add function: the trainer function's name or ARN, e.g. function: hpsearch-trainer (terraform output function_name)\n" +
				"space.yaml:7:10: the lambda backend needs checkpoint.store: s3://bucket/prefix, which its trainers can reach (got the default, a folder of this machine); see docs/deploy.md"},
		{"lambda runtime over 15m", base + "backend: {type: lambda, function: f, max_runtime: 20m}\ncheckpoint: {store: s3://b/p}\n",
			"space.yaml:7:51: backend.max_runtime is 20m0s, more than the lambda backend allows (15m0s); lower it"},
		{"key of another backend", base + "backend: {type: lambda, function: f, job: j}\ncheckpoint: {store: s3://b/p}\n",
			`space.yaml:7:38: unknown key "job" in backend`},
		{"bad function name", base + "backend: {type: lambda, function: 'my function'}\ncheckpoint: {store: s3://b/p}\n",
			`space.yaml:7:35: backend.function "my function" is not a Lambda function name or ARN`},
		{"cloudrun needs project, region, job", base + "backend: {type: cloudrun}\ncheckpoint: {store: s3://b/p}\n",
			"space.yaml:7:10: backend is missing required key \"project\""},
		{"cloudrun vcpu range", base + "backend: {type: cloudrun, project: p, region: r, job: j, vcpu: 16}\ncheckpoint: {store: s3://b/p}\n",
			"space.yaml:7:64: backend.vcpu must be between 0.08 and 8 (Cloud Run's limits), got 16"},
		{"unknown type", base + "backend: {type: ec2}\n",
			`space.yaml:7:17: backend.type must be local, lambda or cloudrun, got "ec2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("space.yaml", []byte(tc.yaml))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %v, want Errors", err)
			}
			if !strings.Contains(errs.Error(), tc.want) {
				t.Fatalf("errors:\n%v\nwant them to contain:\n%s", errs, tc.want)
			}
		})
	}
}

func TestSegmentCost(t *testing.T) {
	b := Backend{MemoryMB: 2048, PricePerGBSecond: 0.5, VCPU: 2, PricePerVCPUSecond: 0.25, GPUs: 1, PricePerGPUSecond: 1, PricePerRequest: 0.125}
	// 2 s x (2 GB x 0.5 + 2 vCPU x 0.25 + 1 GPU x 1) + 0.125
	if got := b.SegmentCost(2 * time.Second); got != 5.125 {
		t.Fatalf("SegmentCost = %v, want 5.125", got)
	}
}
