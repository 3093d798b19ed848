package spec

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Keys of the backend section, by type.
var (
	backendCommonKeys = []string{"type", "memory_mb", "price_per_gb_second", "price_per_request", "max_runtime"}
	backendKeys       = map[BackendType][]string{
		Local:    backendCommonKeys,
		Lambda:   append(backendCommonKeys[:len(backendCommonKeys):len(backendCommonKeys)], "function", "region", "architecture", "concurrency"),
		CloudRun: append(backendCommonKeys[:len(backendCommonKeys):len(backendCommonKeys)], "project", "region", "job", "vcpu", "gpus", "price_per_vcpu_second", "price_per_gpu_second"),
	}
	// lambdaFunction is a function name, a partial ARN or a full ARN,
	// optionally with a qualifier.
	lambdaFunction = regexp.MustCompile(`^(arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:\d{12}:function:)?(\d{12}:)?[a-zA-Z0-9_-]{1,64}(:[a-zA-Z0-9$_-]+)?$`)
	gcpName        = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
)

const (
	minMemoryMB = 128
	// maxMemoryMB is Lambda's limit (and the local default's);
	// maxCloudRunMemoryMB is Cloud Run's (8 vCPU, or a GPU).
	maxMemoryMB         = 10240
	maxCloudRunMemoryMB = 32768
)

// backendDefaults are a backend type's defaults.
func backendDefaults(t BackendType) Backend {
	b := Backend{Type: t, MemoryMB: DefaultMemoryMB, PricePerGBSecond: DefaultPricePerGBSecond, PricePerRequest: DefaultPricePerRequest}
	switch t {
	case Lambda:
		b.Architecture, b.Concurrency, b.MaxRuntime = "arm64", DefaultLambdaConcurrency, LambdaMaxRuntime
	case CloudRun:
		b.VCPU, b.MaxRuntime, b.PricePerRequest = 1, CloudRunMaxRuntime, 0
		b.PricePerGBSecond, b.PricePerVCPUSecond, b.PricePerGPUSecond = CloudRunPricePerGBSecond, CloudRunPricePerVCPUSecond, CloudRunPricePerGPUSecond
	}
	return b
}

func (d *decoder) backend(root *object) Backend {
	f, ok := root.get("backend")
	if !ok {
		return backendDefaults(Local)
	}
	o, ok := d.object(f, "backend", "backend.")
	if !ok {
		return backendDefaults(Local)
	}
	typ := Local
	if f, ok := o.get("type"); ok {
		s, _ := d.enum(f, string(Local), string(Lambda), string(CloudRun))
		if s != "" {
			typ = BackendType(s)
		}
	}
	d.checkKeys(o, backendKeys[typ])
	b := backendDefaults(typ)
	if f, ok := o.get("architecture"); ok {
		b.Architecture, _ = d.enum(f, "arm64", "x86_64")
		if b.Architecture == "x86_64" {
			b.PricePerGBSecond = LambdaX86PricePerGBSecond
		}
	}
	if f, ok := o.get("memory_mb"); ok {
		limit := int64(maxMemoryMB)
		if typ == CloudRun {
			limit = maxCloudRunMemoryMB
		}
		b.MemoryMB, _ = d.intIn(f, minMemoryMB, limit)
	}
	if f, ok := o.get("price_per_gb_second"); ok {
		b.PricePerGBSecond, _ = d.nonNegative(f)
	}
	if f, ok := o.get("price_per_request"); ok {
		b.PricePerRequest, _ = d.nonNegative(f)
	}
	if f, ok := o.get("max_runtime"); ok {
		b.MaxRuntime = d.maxRuntime(f)
		d.runtimeWithin(f, b)
	}
	switch typ {
	case Lambda:
		d.lambdaBackend(o, &b)
	case CloudRun:
		d.cloudRunBackend(o, &b)
	}
	return b
}

// runtimeWithin checks max_runtime against the platform's limit.
func (d *decoder) runtimeWithin(f field, b Backend) {
	limit := map[BackendType]time.Duration{Lambda: LambdaMaxRuntime, CloudRun: CloudRunMaxRuntime}[b.Type]
	switch {
	case limit == 0:
	case b.MaxRuntime == 0:
		d.errorf(f.pos(), "%s cannot be 0 on the %s backend: a segment runs at most %s there; omit it for that default", f.label, b.Type, limit)
	case b.MaxRuntime > limit:
		d.errorf(f.pos(), "%s is %s, more than the %s backend allows (%s); lower it", f.label, b.MaxRuntime, b.Type, limit)
	}
}

func (d *decoder) lambdaBackend(o *object, b *Backend) {
	if f, ok := d.require(o, "function", "add function: the trainer function's name or ARN, e.g. function: hpsearch-trainer (terraform output function_name)"); ok {
		b.Function, _ = d.str(f)
		if b.Function != "" && !lambdaFunction.MatchString(b.Function) {
			d.errorf(f.pos(), "%s %q is not a Lambda function name or ARN; use a name like hpsearch-trainer or arn:aws:lambda:REGION:ACCOUNT:function:NAME", f.label, b.Function)
		}
	}
	if f, ok := o.get("region"); ok {
		b.Region = d.region(f)
	}
	if f, ok := o.get("concurrency"); ok {
		b.Concurrency, _ = d.intIn(f, 1, 100000)
	}
}

func (d *decoder) cloudRunBackend(o *object, b *Backend) {
	for _, k := range []struct {
		key  string
		dst  *string
		hint string
	}{
		{"project", &b.Project, "add project: your Google Cloud project ID"},
		{"region", &b.Region, "add region: the job's region, e.g. europe-west1"},
		{"job", &b.Job, "add job: the Cloud Run job's name (terraform output job_name)"},
	} {
		f, ok := d.require(o, k.key, k.hint)
		if !ok {
			continue
		}
		if k.key == "region" {
			*k.dst = d.region(f)
			continue
		}
		*k.dst, _ = d.str(f)
		if *k.dst != "" && k.key == "job" && !gcpName.MatchString(*k.dst) {
			d.errorf(f.pos(), "%s %q is not a Cloud Run job name (lower-case letters, digits and hyphens, starting with a letter)", f.label, *k.dst)
		}
	}
	if f, ok := o.get("vcpu"); ok {
		if v, ok := d.number(f); ok {
			if v < 0.08 || v > 8 {
				d.errorf(f.pos(), "%s must be between 0.08 and 8 (Cloud Run's limits), got %g", f.label, v)
			}
			b.VCPU = v
		}
	}
	if f, ok := o.get("gpus"); ok {
		b.GPUs, _ = d.intIn(f, 0, 8)
	}
	if f, ok := o.get("price_per_vcpu_second"); ok {
		b.PricePerVCPUSecond, _ = d.nonNegative(f)
	}
	if f, ok := o.get("price_per_gpu_second"); ok {
		b.PricePerGPUSecond, _ = d.nonNegative(f)
	}
}

func (d *decoder) region(f field) string {
	s, ok := d.str(f)
	if ok && (s == "" || strings.ContainsAny(s, " /")) {
		d.errorf(f.pos(), "%s %q is not a region name, e.g. us-east-1 or europe-west1", f.label, s)
	}
	return s
}

// checkRemoteStore reports a function backend whose checkpoints would go to
// this machine's disk, which the function cannot reach.
func (d *decoder) checkRemoteStore(root *object, s *Spec) {
	if s.Backend.Type == Local || strings.HasPrefix(s.Checkpoint.Store, "s3://") {
		return
	}
	f, ok := root.get("checkpoint")
	if !ok {
		f, _ = root.get("backend")
	}
	d.errorf(f.pos(), "the %s backend needs checkpoint.store: s3://bucket/prefix, which its trainers can reach (got %s); see docs/deploy.md", s.Backend.Type, orDefault(s.Checkpoint.Store))
}

func orDefault(store string) string {
	if store == "" {
		return "the default, a folder of this machine"
	}
	return fmt.Sprintf("%q", store)
}
