package lambda

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"
)

// Backoff is a full-jitter exponential backoff: the wait before retry n
// (counting from 0) is drawn uniformly from [0, min(Max, Base x 2^n)].
type Backoff struct {
	// Base bounds the first wait. Defaults to 200 ms.
	Base time.Duration
	// Max bounds every wait drawn. Defaults to 20 s.
	Max time.Duration
}

// wait returns how long to wait before retry n (from 0). When the service
// said how long to wait (retryAfter > 0), the wait is that plus up to Base
// of jitter, so that callers told the same thing do not come back at once.
// rand returns a uniform integer in [0, n).
func (b Backoff) wait(n int, retryAfter time.Duration, rand func(n int64) int64) time.Duration {
	if retryAfter > 0 {
		return retryAfter + time.Duration(rand(int64(b.Base)+1))
	}
	ceiling := b.Base
	for i := 0; i < n && ceiling < b.Max; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, b.Max)
	return time.Duration(rand(int64(ceiling) + 1))
}

// throttle is Lambda declining an invocation for now.
type throttle struct {
	// retryAfter is how long the service asked to wait (Retry-After), or 0.
	retryAfter time.Duration
	// reason says which limit was hit: the exception's Reason (e.g.
	// ReservedFunctionConcurrentInvocationLimitExceeded) or its code.
	reason string
}

// throttleCodes are the error codes of throttles. TooManyRequestsException
// (429) is Lambda's own; EC2ThrottledException is EC2 throttling the
// creation of a VPC function's network interface; the others are the
// throttles that front ends of AWS APIs answer with.
var throttleCodes = map[string]bool{
	"TooManyRequestsException":  true,
	"EC2ThrottledException":     true,
	"ThrottlingException":       true,
	"Throttling":                true,
	"ThrottledException":        true,
	"RequestThrottledException": true,
	"RequestLimitExceeded":      true,
}

// asThrottle says whether err is a throttle: the function was not run,
// and trying again later will run it. HTTP 429, and 503 "Rate exceeded",
// count whatever their code. Lambda's ServiceException (500) does not: it
// is an invocation error, since the function may have run.
func asThrottle(err error) (throttle, bool) {
	var tooMany *types.TooManyRequestsException
	if errors.As(err, &tooMany) {
		reason := string(tooMany.Reason)
		if reason == "" {
			reason = tooMany.ErrorCode()
		}
		return throttle{retryAfter: parseRetryAfter(aws.ToString(tooMany.RetryAfterSeconds)), reason: reason}, true
	}
	var respErr *awshttp.ResponseError
	if !errors.As(err, &respErr) || respErr.Response == nil || respErr.Response.Response == nil {
		return throttle{}, false
	}
	retryAfter := parseRetryAfter(respErr.Response.Header.Get("Retry-After"))
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && throttleCodes[apiErr.ErrorCode()] {
		return throttle{retryAfter: retryAfter, reason: apiErr.ErrorCode()}, true
	}
	switch status := respErr.HTTPStatusCode(); {
	case status == 429:
		return throttle{retryAfter: retryAfter, reason: "HTTP 429"}, true
	case status == 503 && strings.Contains(strings.ToLower(err.Error()), "rate exceeded"):
		return throttle{retryAfter: retryAfter, reason: "HTTP 503 Rate exceeded"}, true
	}
	return throttle{}, false
}

// parseRetryAfter reads a Retry-After in seconds; anything else is 0.
func parseRetryAfter(s string) time.Duration {
	secs, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	// An hour bounds any sensible answer; a larger one is noise.
	if err != nil || secs <= 0 || math.IsNaN(secs) || secs > 3600 {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}
