package lambda

import (
	"errors"
	"fmt"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

var (
	// ErrInvocation says that Lambda did not run the segment, or that it
	// cannot tell whether it did: the endpoint could not be reached, the
	// call failed (HTTP 5xx, a dropped connection), or Lambda refused it
	// (function not found, access denied, function not ready). The error
	// wraps the SDK's, so errors.As finds the smithy.APIError and its code.
	ErrInvocation = errors.New("lambda: invocation failed")
	// ErrFunctionError says that the function ran and did not answer with
	// the segment's result: it crashed, timed out, its handler returned an
	// error (a *FunctionError), or it answered with something that is not
	// the result asked for.
	ErrFunctionError = errors.New("lambda: function error")
	// ErrThrottled says that Lambda kept throttling the invocation for
	// longer than Config.MaxThrottleWait. The segment never ran.
	ErrThrottled = errors.New("lambda: throttled")
	// ErrRequestTooLarge says that the request is over Lambda's payload
	// limit for synchronous invocations; running it again will not help.
	ErrRequestTooLarge = errors.New("lambda: request too large")
)

// FunctionError is a function error: Lambda ran the function, which
// crashed, timed out or returned an error instead of a result. It is
// ErrFunctionError to errors.Is.
type FunctionError struct {
	// Function is the function invoked, with its qualifier if any.
	Function string
	// Kind is the X-Amz-Function-Error header: "Unhandled" (the runtime
	// crashed or timed out, or the handler returned an error) or
	// "Handled".
	Kind string
	// Type and Message are the errorType and errorMessage of the
	// payload, e.g. "Runtime.ExitError" or "Sandbox.Timedout".
	Type    string
	Message string
	// Usage is what the failed invocation was billed: from its REPORT
	// line, or else estimated from the round trip.
	Usage hptype.Usage
}

func (e *FunctionError) Error() string {
	what := e.Message
	if e.Type != "" {
		what = e.Type + ": " + e.Message
	}
	return fmt.Sprintf("function %s failed (%s): %s", e.Function, e.Kind, what)
}

// Is makes a *FunctionError match ErrFunctionError.
func (e *FunctionError) Is(target error) bool { return target == ErrFunctionError }

// hints say what to check for an error code of the Invoke API.
var hints = map[string]string{
	"ResourceNotFoundException":      "check the function name or ARN, the qualifier (alias or version) and the region (AWS_REGION), and that the function is deployed",
	"AccessDeniedException":          "check that the AWS credentials allow lambda:InvokeFunction on the function",
	"UnrecognizedClientException":    "check the AWS credentials (AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
	"InvalidSignatureException":      "check the AWS secret key and the machine's clock",
	"ExpiredTokenException":          "the AWS session credentials expired; refresh them",
	"ResourceNotReadyException":      "the function is being created or updated; wait until its state is Active",
	"ResourceConflictException":      "the function is being updated; wait until its last update is Successful",
	"ServiceException":               "Lambda had an internal error; the function may have run; trying again usually works",
	"InvalidRequestContentException": "Lambda could not read the request; check that the endpoint (AWS_ENDPOINT_URL_LAMBDA) is a Lambda API",
	"RequestTooLargeException":       "the request is over Lambda's payload limit",
	"InvalidRuntimeException":        "check the function's runtime and handler",
	"InvalidZipFileException":        "check the function's code package",
	"RecursiveInvocationException":   "Lambda stopped a recursive loop of invocations; check what invokes the function",
}

// hintPrefixes say what to check for families of error codes.
var hintPrefixes = []struct{ prefix, hint string }{
	{"EC2", "check the function's VPC configuration and its role's EC2 permissions"},
	{"ENI", "check the function's VPC configuration (subnets and their free addresses)"},
	{"Invalid", "check the function's configuration"},
	{"Subnet", "check the function's VPC subnets and their free addresses"},
	{"KMS", "check the KMS key of the function's environment variables and the role's access to it"},
	{"EFS", "check the function's EFS file system configuration"},
	{"S3Files", "check the function's S3 file system configuration"},
	{"SnapStart", "check the function's SnapStart configuration"},
}

// describeInvokeError says what an Invoke error is and what to check.
func describeInvokeError(err error) (code, hint string) {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
		if h, ok := hints[code]; ok {
			return code, h
		}
		for _, p := range hintPrefixes {
			if strings.HasPrefix(code, p.prefix) {
				return code, p.hint
			}
		}
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) && respErr.HTTPStatusCode() != 0 {
		if code == "" {
			code = fmt.Sprintf("HTTP %d", respErr.HTTPStatusCode())
		}
		if respErr.HTTPStatusCode() >= 500 {
			return code, "the Lambda endpoint failed; the function may have run; trying again usually works"
		}
		return code, "see the Lambda Invoke API reference for this error"
	}
	return "no answer", "check that the Lambda endpoint can be reached (AWS_ENDPOINT_URL_LAMBDA or AWS_ENDPOINT_URL, the network, AWS_CA_BUNDLE); the function may have run"
}
