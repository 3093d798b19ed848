package front

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits of a function's configuration, as AWS Lambda has them.
const (
	MinMemoryMB = 128
	MaxMemoryMB = 10240
	MaxTimeout  = 900 * time.Second
)

// Function is one function the front serves: its code (a bootstrap) and
// the configuration Lambda would hold for it.
type Function struct {
	// Name is the function's name, e.g. "hpsearch-trainer". Required.
	Name string `json:"name"`
	// Bootstrap is the path of the function's bootstrap executable (the
	// provided.al2023 custom runtime's entry point). Required.
	Bootstrap string `json:"bootstrap"`
	// MemoryMB is the function's memory size in MB: it is reported in
	// the REPORT line and given to the runtime as
	// AWS_LAMBDA_FUNCTION_MEMORY_SIZE; it is not enforced. Defaults to 128,
	// as Lambda's does; must be in 128..10240.
	MemoryMB int `json:"memory_mb,omitempty"`
	// Timeout is the function's timeout, a whole number of seconds.
	// Defaults to 3 s, as Lambda's does; must be in 1 s..900 s.
	Timeout Duration `json:"timeout,omitempty"`
	// Concurrency is the function's reserved concurrency: how many
	// execution environments (aws-lambda-rie processes) it has, and so
	// how many invocations run at once; one more is throttled. Defaults
	// to 1.
	Concurrency int `json:"concurrency,omitempty"`
	// Env is the function's environment variables.
	Env map[string]string `json:"env,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("30s").
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string like \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// withDefaults returns f with its zero fields set to their defaults.
func (f Function) withDefaults() Function {
	if f.MemoryMB == 0 {
		f.MemoryMB = MinMemoryMB
	}
	if f.Timeout == 0 {
		f.Timeout = Duration(3 * time.Second)
	}
	if f.Concurrency == 0 {
		f.Concurrency = 1
	}
	return f
}

// validate checks a function that has its defaults.
func (f Function) validate() error {
	var errs []error
	if !validName(f.Name) {
		errs = append(errs, fmt.Errorf("name %q: a function name is 1 to 64 letters, digits, '-' and '_'", f.Name))
	}
	if f.Bootstrap == "" {
		errs = append(errs, errors.New("bootstrap: required: the path of the function's bootstrap executable"))
	} else if st, err := os.Stat(f.Bootstrap); err != nil {
		errs = append(errs, fmt.Errorf("bootstrap: %w; build it first (make lambda-zip)", err))
	} else if st.IsDir() || st.Mode()&0o111 == 0 {
		errs = append(errs, fmt.Errorf("bootstrap %s: not an executable file", f.Bootstrap))
	}
	if f.MemoryMB < MinMemoryMB || f.MemoryMB > MaxMemoryMB {
		errs = append(errs, fmt.Errorf("memory %d MB: must be in %d..%d", f.MemoryMB, MinMemoryMB, MaxMemoryMB))
	}
	if t := time.Duration(f.Timeout); t < time.Second || t > MaxTimeout || t%time.Second != 0 {
		errs = append(errs, fmt.Errorf("timeout %v: must be a whole number of seconds in 1s..%v", t, MaxTimeout))
	}
	if f.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d: must be at least 1", f.Concurrency))
	}
	for k := range f.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs = append(errs, fmt.Errorf("env: variable name %q: must be non-empty, without '=' or NUL", k))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("function %q: %w", f.Name, err)
	}
	return nil
}

// validName reports whether s is a valid Lambda function name.
func validName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
		default:
			return false
		}
	}
	return true
}

// ParseFunction reads a function from its flag form: comma-separated
// key=value fields, e.g.
//
//	name=hpsearch-trainer,bootstrap=dist/lambda/amd64/bootstrap,memory=1024,timeout=30s,concurrency=4,env=K=V;K2=V2
//
// The keys are name, bootstrap, memory (MB), timeout (a Go duration),
// concurrency and env (semicolon-separated NAME=VALUE pairs; it may be
// given more than once). A value cannot hold a comma, nor an env value a
// semicolon: use a config file (LoadConfig) for those. Defaults are
// applied and the function validated as in Config.
func ParseFunction(spec string) (Function, error) {
	var f Function
	for field := range strings.SplitSeq(spec, ",") {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return Function{}, fmt.Errorf("function %q: field %q is not key=value", spec, field)
		}
		var err error
		switch key {
		case "name":
			f.Name = value
		case "bootstrap":
			f.Bootstrap = value
		case "memory":
			f.MemoryMB, err = strconv.Atoi(strings.TrimSuffix(value, "MB"))
		case "timeout":
			var d time.Duration
			d, err = time.ParseDuration(value)
			f.Timeout = Duration(d)
		case "concurrency":
			f.Concurrency, err = strconv.Atoi(value)
		case "env":
			if f.Env == nil {
				f.Env = map[string]string{}
			}
			for pair := range strings.SplitSeq(value, ";") {
				if pair == "" {
					continue
				}
				k, v, ok := strings.Cut(pair, "=")
				if !ok {
					return Function{}, fmt.Errorf("function %q: env %q is not NAME=VALUE", spec, pair)
				}
				f.Env[k] = v
			}
		default:
			return Function{}, fmt.Errorf("function %q: unknown key %q; known: name, bootstrap, memory, timeout, concurrency, env", spec, key)
		}
		if err != nil {
			return Function{}, fmt.Errorf("function %q: %s: %w", spec, key, err)
		}
	}
	f = f.withDefaults()
	if err := f.validate(); err != nil {
		return Function{}, err
	}
	return f, nil
}

// FileConfig is the JSON form of a config file:
//
//	{"functions": [{"name": "hpsearch-trainer", "bootstrap": "/path/bootstrap",
//	  "memory_mb": 1024, "timeout": "30s", "concurrency": 4,
//	  "env": {"AWS_ENDPOINT_URL": "http://127.0.0.1:4566"}}]}
type FileConfig struct {
	Functions []Function `json:"functions"`
}

// LoadConfig reads the functions of a config file (FileConfig), applies
// their defaults and validates them.
func LoadConfig(path string) ([]Function, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the config file: %w", err)
	}
	var fc FileConfig
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	fns := make([]Function, len(fc.Functions))
	var errs []error
	for i, f := range fc.Functions {
		fns[i] = f.withDefaults()
		errs = append(errs, fns[i].validate())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return fns, nil
}

// sortedEnv returns env as NAME=VALUE strings, sorted by name.
func sortedEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}
