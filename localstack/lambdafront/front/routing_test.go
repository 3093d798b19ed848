package front

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"
)

// routingFront serves a front whose requests in these tests never reach
// an execution environment, so it needs no aws-lambda-rie: the test binary
// stands in for it.
func routingFront(t *testing.T, controlPlane string) (*lambda.Client, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, client, url := serveFront(t, Config{RIE: exe, ControlPlane: controlPlane, Functions: []Function{testFunctionConfig(t, "fn", 3*time.Second, 1)}})
	return client, url
}

// Requests that Lambda refuses get Lambda's errors, which the SDK types.
func TestInvokeErrors(t *testing.T) {
	client, _ := routingFront(t, "")
	for _, tc := range []struct {
		name string
		in   lambda.InvokeInput
		want any // a pointer to the SDK error type
	}{
		{"unknown function", lambda.InvokeInput{FunctionName: aws.String("nope")}, new(*types.ResourceNotFoundException)},
		{"unknown function by ARN", lambda.InvokeInput{FunctionName: aws.String("arn:aws:lambda:us-east-1:123456789012:function:nope")}, new(*types.ResourceNotFoundException)},
		{"unknown version", lambda.InvokeInput{FunctionName: aws.String("fn:2")}, new(*types.ResourceNotFoundException)},
		{"unknown alias", lambda.InvokeInput{FunctionName: aws.String("fn"), Qualifier: aws.String("live")}, new(*types.ResourceNotFoundException)},
		{"qualifiers disagree", lambda.InvokeInput{FunctionName: aws.String("fn:$LATEST"), Qualifier: aws.String("live")}, new(*types.InvalidParameterValueException)},
		{"asynchronous", lambda.InvokeInput{FunctionName: aws.String("fn"), InvocationType: types.InvocationTypeEvent}, new(*types.InvalidParameterValueException)},
		{"not JSON", lambda.InvokeInput{FunctionName: aws.String("fn"), Payload: []byte("{")}, new(*types.InvalidRequestContentException)},
		{"too large", lambda.InvokeInput{FunctionName: aws.String("fn"), Payload: bytes.Repeat([]byte(" "), maxRequestBytes+1)}, new(*types.RequestTooLargeException)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Invoke(t.Context(), &tc.in)
			if err == nil || !errors.As(err, tc.want) {
				t.Errorf("Invoke: %v, want %T", err, tc.want)
			}
		})
	}
	t.Run("malformed name", func(t *testing.T) {
		_, err := client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("a:b:c")})
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" {
			t.Errorf("Invoke: %v, want ValidationException", err)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		out, err := client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("fn"), InvocationType: types.InvocationTypeDryRun})
		if err != nil || out.StatusCode != http.StatusNoContent {
			t.Errorf("Invoke DryRun: %v, status %v; want 204", err, out)
		}
	})
}

// An environment that cannot start runs nothing: the answer is Lambda's
// ServiceException, which is safe to retry.
func TestEnvironmentThatCannotStart(t *testing.T) {
	notRIE, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1) to stand in for a broken aws-lambda-rie")
	}
	_, client, _ := serveFront(t, Config{RIE: notRIE, Functions: []Function{testFunctionConfig(t, "fn", 3*time.Second, 1)}})
	_, err = client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("fn")})
	var serviceErr *types.ServiceException
	if !errors.As(err, &serviceErr) || !strings.Contains(aws.ToString(serviceErr.Message), "exited before it listened") {
		t.Errorf("Invoke: %v, want a ServiceException saying that aws-lambda-rie exited", err)
	}
}

// The rest of the Lambda API goes to the control plane when there is one.
func TestControlPlane(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"FunctionName": strings.TrimPrefix(r.URL.Path, "/2015-03-31/functions/"), "Method": r.Method})
	}))
	defer upstream.Close()
	client, _ := routingFront(t, upstream.URL)
	out, err := client.GetFunctionConfiguration(t.Context(), &lambda.GetFunctionConfigurationInput{FunctionName: aws.String("fn")})
	if err != nil || aws.ToString(out.FunctionName) != "fn/configuration" {
		t.Errorf("GetFunctionConfiguration through the front: %v, %+v; want the control plane's answer", err, out)
	}

	client, url := routingFront(t, "")
	_, err = client.GetFunctionConfiguration(t.Context(), &lambda.GetFunctionConfigurationInput{FunctionName: aws.String("fn")})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "UnknownOperationException" {
		t.Errorf("GetFunctionConfiguration without a control plane: %v, want UnknownOperationException", err)
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: %d %s", resp.StatusCode, body)
	}
}
