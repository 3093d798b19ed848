// Package terraform_test checks the Terraform modules under deploy/terraform
// without downloading providers (the network is out of reach where the
// tests run; `terraform validate` runs on the pool module only when a local
// provider mirror is there): every .tf file
// parses, is formatted as `terraform fmt` would format it, declares its
// variables with descriptions and types and uses them all, describes its
// outputs, pins its provider's major version, and renders a
// space_yaml_backend snippet that the space-file decoder (internal/spec)
// accepts with the values it was rendered from. When a terraform binary is
// on PATH, `terraform fmt -check -recursive` runs too (it needs no
// provider). Every failure names the file and line.
package terraform_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/hpsearch/hpsearch/internal/spec"
)

// tfFile is one parsed .tf file; path is relative to deploy/terraform, as
// every message gives it.
type tfFile struct {
	path string
	src  []byte
	body *hclsyntax.Body
}

// module is a directory of .tf files, which Terraform reads as one.
type module struct {
	dir   string
	files []*tfFile
}

// parsed holds every .tf file under deploy/terraform, parsed once for all
// the tests, and the problems met doing so.
var parsed struct {
	once    sync.Once
	modules []*module
	errs    []string // file:line: problem
	walkErr error
}

func parseAll() {
	byDir := map[string]*module{}
	parser := hclparse.NewParser()
	parsed.walkErr = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".terraform" {
				return filepath.SkipDir // providers and modules fetched by init
			}
			return nil
		}
		if filepath.Ext(path) != ".tf" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, diags := parser.ParseHCL(src, path)
		for _, d := range diags {
			parsed.errs = append(parsed.errs, fmt.Sprintf("%s: %s", where(path, d.Subject), diagText(d)))
		}
		if diags.HasErrors() {
			return nil
		}
		dir := filepath.Dir(path)
		m := byDir[dir]
		if m == nil {
			m = &module{dir: dir}
			byDir[dir] = m
		}
		m.files = append(m.files, &tfFile{path: path, src: src, body: f.Body.(*hclsyntax.Body)})
		return nil
	})
	for _, m := range byDir {
		parsed.modules = append(parsed.modules, m)
	}
	sort.Slice(parsed.modules, func(i, j int) bool { return parsed.modules[i].dir < parsed.modules[j].dir })
}

// loadModules returns the modules, sorted by directory (WalkDir gives each
// module's files sorted by name). It stops the test if any file did not
// parse: TestParse reports which.
func loadModules(t *testing.T) []*module {
	t.Helper()
	parsed.once.Do(parseAll)
	if parsed.walkErr != nil {
		t.Fatalf("walk deploy/terraform: %v", parsed.walkErr)
	}
	if len(parsed.errs) > 0 {
		t.Fatalf("%d problems parsing the .tf files (see TestParse)", len(parsed.errs))
	}
	return parsed.modules
}

// TestParse checks that every .tf file parses without a diagnostic, not
// even a warning.
func TestParse(t *testing.T) {
	parsed.once.Do(parseAll)
	if parsed.walkErr != nil {
		t.Fatalf("walk deploy/terraform: %v", parsed.walkErr)
	}
	for _, e := range parsed.errs {
		t.Error(e)
	}
}

// The modules this package is about; a test that finds none of them has
// lost its files, not passed.
var wantModules = []string{"aws", "gcp", filepath.Join("aws", "pool")}

func TestModulesExist(t *testing.T) {
	var dirs []string
	for _, m := range loadModules(t) {
		dirs = append(dirs, m.dir)
	}
	for _, want := range wantModules {
		if !slices.Contains(dirs, want) {
			t.Errorf("no .tf files in deploy/terraform/%s (found modules %v)", want, dirs)
		}
	}
}

// TestFormat checks that every file is in canonical form: hclwrite.Format is
// the formatter `terraform fmt` uses.
func TestFormat(t *testing.T) {
	for _, m := range loadModules(t) {
		for _, f := range m.files {
			got := hclwrite.Format(f.src)
			if bytes.Equal(got, f.src) {
				continue
			}
			line, want, have := firstDiff(got, f.src)
			t.Errorf("%s:%d: not formatted as terraform fmt would (run `terraform fmt -recursive deploy/terraform`):\n\twant %q\n\thave %q",
				f.path, line, want, have)
		}
	}
}

// TestVariables checks that every variable has a non-empty description and a
// type, and is used somewhere in its module outside its own declaration.
func TestVariables(t *testing.T) {
	for _, m := range loadModules(t) {
		used := usedVariables(m)
		n := 0
		for _, f := range m.files {
			for _, b := range f.body.Blocks {
				if b.Type != "variable" {
					continue
				}
				n++
				if len(b.Labels) != 1 {
					t.Errorf("%s: variable block with %d labels, want 1", where(f.path, b.DefRange().Ptr()), len(b.Labels))
					continue
				}
				name := b.Labels[0]
				at := where(f.path, b.DefRange().Ptr())
				if err := nonEmptyString(b.Body, "description"); err != nil {
					t.Errorf("%s: variable %q: %v", at, name, err)
				}
				if _, ok := b.Body.Attributes["type"]; !ok {
					t.Errorf("%s: variable %q has no type", at, name)
				}
				if !used[name] {
					t.Errorf("%s: variable %q is declared but var.%s is never used in module %s", at, name, name, m.dir)
				}
			}
		}
		if n == 0 {
			t.Errorf("module %s declares no variable", m.dir)
		}
	}
}

// TestOutputs checks that every output has a non-empty description.
func TestOutputs(t *testing.T) {
	for _, m := range loadModules(t) {
		for _, f := range m.files {
			for _, b := range f.body.Blocks {
				if b.Type != "output" || len(b.Labels) != 1 {
					continue
				}
				if err := nonEmptyString(b.Body, "description"); err != nil {
					t.Errorf("%s: output %q: %v", where(f.path, b.DefRange().Ptr()), b.Labels[0], err)
				}
				if _, ok := b.Body.Attributes["value"]; !ok {
					t.Errorf("%s: output %q has no value", where(f.path, b.DefRange().Ptr()), b.Labels[0])
				}
			}
		}
	}
}

// TestRequiredProviders checks that each module pins Terraform and its
// provider to a major version.
func TestRequiredProviders(t *testing.T) {
	want := map[string]struct{ provider, source, version string }{
		"aws": {"aws", "hashicorp/aws", "~> 5."},
		"gcp": {"google", "hashicorp/google", "~> 6."},

		// The GPU worker pool.
		filepath.Join("aws", "pool"): {"aws", "hashicorp/aws", "~> 5."},
	}
	for _, m := range loadModules(t) {
		w, ok := want[m.dir]
		if !ok {
			continue
		}
		var found bool
		for _, f := range m.files {
			for _, tb := range f.body.Blocks {
				if tb.Type != "terraform" {
					continue
				}
				if _, ok := tb.Body.Attributes["required_version"]; !ok {
					t.Errorf("%s: terraform block without required_version", where(f.path, tb.DefRange().Ptr()))
				}
				for _, rp := range tb.Body.Blocks {
					if rp.Type != "required_providers" {
						continue
					}
					attr, ok := rp.Body.Attributes[w.provider]
					if !ok {
						continue
					}
					found = true
					v, diags := attr.Expr.Value(nil)
					if diags.HasErrors() || !v.Type().IsObjectType() {
						t.Errorf("%s: required_providers.%s is not a literal object", where(f.path, attr.SrcRange.Ptr()), w.provider)
						continue
					}
					src, ver := v.GetAttr("source").AsString(), v.GetAttr("version").AsString()
					if src != w.source || !strings.HasPrefix(ver, w.version) {
						t.Errorf("%s: required_providers.%s = {source %q, version %q}, want source %q and version %s*",
							where(f.path, attr.SrcRange.Ptr()), w.provider, src, ver, w.source, w.version)
					}
				}
			}
		}
		if !found {
			t.Errorf("module %s does not declare required_providers.%s", m.dir, w.provider)
		}
	}
}

// snippetCase says what a module's space_yaml_backend must render to.
type snippetCase struct {
	typ  string   // backend.type
	keys []string // backend's keys, exactly
	// samples give the references that neither a variable's default nor a
	// local computed from defaults can: resource attributes, required
	// variables. Plausible values, so that the space-file decoder checks
	// them as it would the real ones.
	samples map[string]cty.Value
	// check compares the decoded backend with the samples and defaults.
	check func(t *testing.T, at string, b spec.Backend)
}

var snippetCases = map[string]snippetCase{
	"aws": {
		typ:  "lambda",
		keys: []string{"type", "function", "region", "memory_mb", "architecture", "max_runtime", "concurrency"},
		samples: map[string]cty.Value{
			"aws_lambda_function.trainer.arn":         cty.StringVal("arn:aws:lambda:eu-west-1:123456789012:function:hpsearch-trainer"),
			"aws_lambda_function.trainer.memory_size": cty.NumberIntVal(2048),
			"data.aws_region.current.name":            cty.StringVal("eu-west-1"),
			"local.checkpoint_store":                  cty.StringVal("s3://hpsearch-checkpoints-sample/hpsearch"),
		},
		check: func(t *testing.T, at string, b spec.Backend) {
			want := spec.Backend{Function: "arn:aws:lambda:eu-west-1:123456789012:function:hpsearch-trainer", Region: "eu-west-1",
				MemoryMB: 2048, Architecture: "arm64", MaxRuntime: 870 * time.Second, Concurrency: 10}
			got := spec.Backend{Function: b.Function, Region: b.Region, MemoryMB: b.MemoryMB,
				Architecture: b.Architecture, MaxRuntime: b.MaxRuntime, Concurrency: b.Concurrency}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: decoded backend %+v, want %+v", at, got, want)
			}
		},
	},
	"gcp": {
		typ:  "cloudrun",
		keys: []string{"type", "project", "region", "job", "vcpu", "memory_mb", "gpus", "max_runtime"},
		samples: map[string]cty.Value{
			"var.project_id": cty.StringVal("sample-project"),
			"google_cloud_run_v2_job.trainer.location": cty.StringVal("europe-west1"),
			"google_cloud_run_v2_job.trainer.name":     cty.StringVal("hpsearch-trainer"),
			"local.checkpoint_store":                   cty.StringVal("s3://sample-project-hpsearch-checkpoints/hpsearch"),
		},
		check: func(t *testing.T, at string, b spec.Backend) {
			want := spec.Backend{Project: "sample-project", Region: "europe-west1", Job: "hpsearch-trainer",
				VCPU: 2, MemoryMB: 4096, GPUs: 0, MaxRuntime: 3570 * time.Second}
			got := spec.Backend{Project: b.Project, Region: b.Region, Job: b.Job,
				VCPU: b.VCPU, MemoryMB: b.MemoryMB, GPUs: b.GPUs, MaxRuntime: b.MaxRuntime}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: decoded backend %+v, want %+v", at, got, want)
			}
		},
	},
}

// spaceHead is the rest of a space file, for the snippet to complete.
const spaceHead = `name: terraform-snippet
objective: {metric: val_accuracy, goal: maximize}
parameters:
  hidden_units: {type: int, min: 16, max: 128, step: 16}
trainer:
  builtin: digits-mlp
max_trials: 1
`

// TestSpaceYAMLBackend renders each module's space_yaml_backend output with
// the variables' defaults (locals computed from them too) and samples for
// what only an apply knows, checks that it is YAML with exactly the keys of
// the space file's backend and checkpoint sections, and that the space-file
// decoder accepts it, with those values, as the rest of a space file.
func TestSpaceYAMLBackend(t *testing.T) {
	for _, m := range loadModules(t) {
		c, ok := snippetCases[m.dir]
		if !ok {
			continue
		}
		t.Run(m.dir, func(t *testing.T) {
			attr, path := findOutput(m, "space_yaml_backend")
			if attr == nil {
				t.Fatalf("module %s has no output space_yaml_backend", m.dir)
			}
			at := where(path, attr.SrcRange.Ptr())
			ctx, err := snippetContext(m, attr.Expr, c.samples)
			if err != nil {
				t.Fatalf("%s: %v", at, err)
			}
			v, diags := attr.Expr.Value(ctx)
			if diags.HasErrors() {
				t.Fatalf("%s: render space_yaml_backend: %s", at, diags.Error())
			}
			if !v.Type().Equals(cty.String) || !v.IsKnown() {
				t.Fatalf("%s: space_yaml_backend is %s, want a known string", at, v.Type().FriendlyName())
			}
			text := v.AsString()

			var doc struct {
				Backend    map[string]any `yaml:"backend"`
				Checkpoint map[string]any `yaml:"checkpoint"`
			}
			if err := yaml.UnmarshalWithOptions([]byte(text), &doc, yaml.DisallowUnknownField()); err != nil {
				t.Fatalf("%s: space_yaml_backend is not a backend and a checkpoint section: %v\n%s", at, err, text)
			}
			checkSection(t, at, "backend", doc.Backend, c.keys)
			checkSection(t, at, "checkpoint", doc.Checkpoint, []string{"store"})
			if got := doc.Backend["type"]; got != c.typ {
				t.Errorf("%s: backend.type = %v, want %q", at, got, c.typ)
			}

			s, err := spec.Decode(m.dir+"/space.yaml", []byte(spaceHead+text))
			if err != nil {
				t.Fatalf("%s: the space-file decoder rejects the snippet:\n%v\n%s", at, err, text)
			}
			if s.Backend.Type != spec.BackendType(c.typ) {
				t.Errorf("%s: decoded backend type %q, want %q", at, s.Backend.Type, c.typ)
			}
			c.check(t, at, s.Backend)
			if want := c.samples["local.checkpoint_store"].AsString(); s.Checkpoint.Store != want {
				t.Errorf("%s: decoded checkpoint.store %q, want %q", at, s.Checkpoint.Store, want)
			}
		})
	}
}

// TestTerraformFmt runs `terraform fmt -check -recursive` when terraform is
// installed; TestFormat covers the same ground without it.
func TestTerraformFmt(t *testing.T) {
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not on PATH; TestFormat checks the formatting with hclwrite")
	}
	cmd := exec.Command(bin, "fmt", "-check", "-recursive", "-diff", "-no-color", ".")
	// No upgrade check over the network, no CLI configuration needed.
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+os.DevNull)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("terraform fmt -check -recursive deploy/terraform: %v\n%s", err, out)
	}
}

func checkSection(t *testing.T, at, name string, got map[string]any, keys []string) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: space_yaml_backend has no %s section", at, name)
		return
	}
	for _, k := range keys {
		v, ok := got[k]
		if !ok {
			t.Errorf("%s: %s.%s is missing", at, name, k)
			continue
		}
		s := fmt.Sprint(v)
		if s == "" || strings.Contains(s, "${") || strings.Contains(s, "#") {
			t.Errorf("%s: %s.%s = %q, want a rendered value", at, name, k, s)
		}
	}
	for k := range got {
		if !slices.Contains(keys, k) {
			t.Errorf("%s: %s.%s is not a key of the space file's %s section (want %v)", at, name, k, name, keys)
		}
	}
}

// usedVariables returns the names NAME of every var.NAME reference in the
// module, outside variable blocks (a validation that reads its own variable
// is not a use).
func usedVariables(m *module) map[string]bool {
	used := map[string]bool{}
	for _, f := range m.files {
		for _, b := range f.body.Blocks {
			if b.Type == "variable" {
				continue
			}
			hclsyntax.VisitAll(b, func(n hclsyntax.Node) hcl.Diagnostics {
				if e, ok := n.(*hclsyntax.ScopeTraversalExpr); ok {
					if name, ok := varName(e.Traversal); ok {
						used[name] = true
					}
				}
				return nil
			})
		}
	}
	return used
}

func varName(tr hcl.Traversal) (string, bool) {
	if len(tr) < 2 || tr.RootName() != "var" {
		return "", false
	}
	a, ok := tr[1].(hcl.TraverseAttr)
	return a.Name, ok
}

// nonEmptyString checks that body has the attribute name as a literal,
// non-blank string.
func nonEmptyString(body *hclsyntax.Body, name string) error {
	attr, ok := body.Attributes[name]
	if !ok {
		return fmt.Errorf("has no %s", name)
	}
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || !v.Type().Equals(cty.String) {
		return fmt.Errorf("%s is not a literal string", name)
	}
	if strings.TrimSpace(v.AsString()) == "" {
		return fmt.Errorf("%s is empty", name)
	}
	return nil
}

func findOutput(m *module, name string) (*hclsyntax.Attribute, string) {
	for _, f := range m.files {
		for _, b := range f.body.Blocks {
			if b.Type == "output" && len(b.Labels) == 1 && b.Labels[0] == name {
				return b.Body.Attributes["value"], f.path
			}
		}
	}
	return nil, ""
}

// snippetContext gives each reference of expr a value: samples[ref] if
// given, else a variable's default, else a local's value computed from
// variables' defaults (one level: a local that refers to anything else needs
// a sample).
func snippetContext(m *module, expr hcl.Expression, samples map[string]cty.Value) (*hcl.EvalContext, error) {
	defaults, locals := map[string]cty.Value{}, map[string]hcl.Expression{}
	for _, f := range m.files {
		for _, b := range f.body.Blocks {
			switch {
			case b.Type == "variable" && len(b.Labels) == 1:
				if d, ok := b.Body.Attributes["default"]; ok {
					if v, diags := d.Expr.Value(nil); !diags.HasErrors() && !v.IsNull() {
						defaults[b.Labels[0]] = v
					}
				}
			case b.Type == "locals":
				for name, a := range b.Body.Attributes {
					locals[name] = a.Expr
				}
			}
		}
	}
	varCtx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(defaults)}}

	root := map[string]any{}
	for _, tr := range expr.Variables() {
		ref := traversalString(tr)
		names := strings.Split(ref, ".")
		if strings.Contains(ref, "[") || len(names) < 2 {
			return nil, fmt.Errorf("reference %s: only a.b.c references can be sampled; compute it in a local", ref)
		}
		v, ok := samples[ref]
		switch {
		case ok:
		case names[0] == "var" && len(names) == 2:
			if v, ok = defaults[names[1]]; !ok {
				return nil, fmt.Errorf("var.%s has no default: give the test a sample for it", names[1])
			}
		case names[0] == "local" && len(names) == 2:
			e, found := locals[names[1]]
			if !found {
				return nil, fmt.Errorf("local.%s is not declared", names[1])
			}
			var diags hcl.Diagnostics
			if v, diags = e.Value(varCtx); diags.HasErrors() {
				return nil, fmt.Errorf("local.%s cannot be computed from variables' defaults (%s): give the test a sample for it", names[1], diags.Error())
			}
		default:
			return nil, fmt.Errorf("reference %s: give the test a sample for it", ref)
		}
		if err := setPath(root, names, v); err != nil {
			return nil, err
		}
	}
	vars := map[string]cty.Value{}
	for k, v := range root {
		vars[k] = toCty(v)
	}
	return &hcl.EvalContext{Variables: vars}, nil
}

// setPath stores v in the tree of maps at names.
func setPath(node map[string]any, names []string, v cty.Value) error {
	for i, n := range names[:len(names)-1] {
		next, ok := node[n].(map[string]any)
		if !ok {
			if _, isLeaf := node[n]; isLeaf {
				return fmt.Errorf("reference %s is also used as a value", strings.Join(names[:i+1], "."))
			}
			next = map[string]any{}
			node[n] = next
		}
		node = next
	}
	last := names[len(names)-1]
	if _, isMap := node[last].(map[string]any); isMap {
		return fmt.Errorf("reference %s is also used as an object", strings.Join(names, "."))
	}
	node[last] = v
	return nil
}

func toCty(v any) cty.Value {
	switch v := v.(type) {
	case cty.Value:
		return v
	case map[string]any:
		attrs := map[string]cty.Value{}
		for k, x := range v {
			attrs[k] = toCty(x)
		}
		return cty.ObjectVal(attrs)
	}
	panic(fmt.Sprintf("toCty: unexpected %T", v))
}

func traversalString(tr hcl.Traversal) string {
	var b strings.Builder
	for i, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		default:
			if i > 0 {
				b.WriteString("[...]")
			}
		}
	}
	return b.String()
}

// where formats a position as file:line (the file as the test knows it,
// relative to deploy/terraform).
func where(path string, r *hcl.Range) string {
	if r == nil {
		return path
	}
	return fmt.Sprintf("%s:%d", path, r.Start.Line)
}

func diagText(d *hcl.Diagnostic) string {
	if d.Detail == "" {
		return d.Summary
	}
	return d.Summary + ": " + d.Detail
}

// firstDiff returns the 1-based number of the first line where want and have
// differ, and that line of each.
func firstDiff(want, have []byte) (int, string, string) {
	wl := strings.Split(string(want), "\n")
	hl := strings.Split(string(have), "\n")
	for i := 0; ; i++ {
		var w, h string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(hl) {
			h = hl[i]
		}
		if w != h || i >= len(wl) || i >= len(hl) {
			return i + 1, w, h
		}
	}
}

// --- The GPU worker pool (aws/pool) -----------------------------------------
//
// The pool module computes its space_yaml_pool output, its user data and its
// preconditions from locals that call functions, so the tests below evaluate
// them as Terraform would at plan time: variables converted to their
// declared types (defaults, or a case's values), locals resolved on demand,
// a managed resource's attribute taken from its configured argument,
// Terraform's functions from go-cty's standard library (which Terraform's
// are built on), and samples for what only an apply knows (data sources).

var poolDir = filepath.Join("aws", "pool")

// poolRequired gives the pool's variables that have no default.
var poolRequired = map[string]cty.Value{
	"checkpoint_bucket": cty.StringVal("hpsearch-checkpoints-sample"),
	"subnet_ids":        cty.ListVal([]cty.Value{cty.StringVal("subnet-0123456789abcdef0")}),
	"worker_binary_url": cty.StringVal("https://github.com/hpsearch/hpsearch/releases/download/v0.1.0/hpsearch_linux_amd64.tar.gz"),
}

// poolSamples stand for what only an apply knows.
var poolSamples = map[string]cty.Value{
	"data.aws_region.current.name":     cty.StringVal("us-east-1"),
	"data.aws_ami.worker.architecture": cty.StringVal("x86_64"),
	"data.aws_ami.worker.id":           cty.StringVal("ami-0123456789abcdef0"),
	"path.module":                      cty.StringVal(poolDir),
}

func poolModule(t *testing.T) *module {
	t.Helper()
	for _, m := range loadModules(t) {
		if m.dir == poolDir {
			return m
		}
	}
	t.Fatalf("no .tf files in deploy/terraform/%s", poolDir)
	return nil
}

// tfEval evaluates a module's expressions for one set of variables.
type tfEval struct {
	m       *module
	vars    cty.Value // the var object
	locals  map[string]hcl.Expression
	samples map[string]cty.Value
	values  map[string]cty.Value // locals computed so far
	busy    map[string]bool      // locals being computed: a cycle guard
}

// newTFEval gives every variable of m the value set gives it, else its
// default, converted to its declared type; a variable without default must
// be set. samples overrides poolSamples' entries.
func newTFEval(m *module, set, samples map[string]cty.Value) (*tfEval, error) {
	e := &tfEval{m: m, locals: map[string]hcl.Expression{}, samples: map[string]cty.Value{},
		values: map[string]cty.Value{}, busy: map[string]bool{}}
	for k, v := range poolSamples {
		e.samples[k] = v
	}
	for k, v := range samples {
		e.samples[k] = v
	}
	vars := map[string]cty.Value{}
	for _, f := range m.files {
		for _, b := range f.body.Blocks {
			switch {
			case b.Type == "variable" && len(b.Labels) == 1:
				name, at := b.Labels[0], where(f.path, b.DefRange().Ptr())
				ty := cty.DynamicPseudoType
				if a, ok := b.Body.Attributes["type"]; ok {
					var diags hcl.Diagnostics
					if ty, diags = typeexpr.TypeConstraint(a.Expr); diags.HasErrors() {
						return nil, fmt.Errorf("%s: variable %q: %s", at, name, diags.Error())
					}
				}
				v, ok := set[name]
				if !ok {
					d, hasDefault := b.Body.Attributes["default"]
					if !hasDefault {
						return nil, fmt.Errorf("%s: variable %q has no default: the case must set it", at, name)
					}
					var diags hcl.Diagnostics
					if v, diags = d.Expr.Value(nil); diags.HasErrors() {
						return nil, fmt.Errorf("%s: variable %q: default: %s", at, name, diags.Error())
					}
				}
				cv, err := convert.Convert(v, ty)
				if err != nil {
					return nil, fmt.Errorf("%s: variable %q: value %#v does not convert to %s: %v", at, name, v, ty.FriendlyName(), err)
				}
				vars[name] = cv
			case b.Type == "locals":
				for name, a := range b.Body.Attributes {
					e.locals[name] = a.Expr
				}
			}
		}
	}
	for name := range set {
		if _, ok := vars[name]; !ok {
			return nil, fmt.Errorf("the case sets var.%s, which module %s does not declare", name, m.dir)
		}
	}
	e.vars = cty.ObjectVal(vars)
	return e, nil
}

func (e *tfEval) eval(expr hcl.Expression) (cty.Value, error) {
	ctx, err := e.context(expr)
	if err != nil {
		return cty.NilVal, err
	}
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, errors.New(diags.Error())
	}
	return v, nil
}

// context gives expr's references their values: var and local, samples,
// and a managed resource's attributes that its configuration sets.
func (e *tfEval) context(expr hcl.Expression) (*hcl.EvalContext, error) {
	root := map[string]any{}
	locals := map[string]cty.Value{}
	for _, tr := range expr.Variables() {
		switch tr.RootName() {
		case "var":
			continue
		case "local":
			a, ok := tr[1].(hcl.TraverseAttr)
			if len(tr) < 2 || !ok {
				return nil, fmt.Errorf("reference %s: want local.NAME", traversalString(tr))
			}
			v, err := e.local(a.Name)
			if err != nil {
				return nil, err
			}
			locals[a.Name] = v
			continue
		}
		ref := traversalString(tr)
		v, ok := e.samples[ref]
		if !ok {
			var err error
			if v, err = e.configured(ref); err != nil {
				return nil, err
			}
		}
		if err := setPath(root, strings.Split(ref, "."), v); err != nil {
			return nil, err
		}
	}
	vars := map[string]cty.Value{"var": e.vars, "local": cty.ObjectVal(locals)}
	for k, v := range root {
		vars[k] = toCty(v)
	}
	return &hcl.EvalContext{Variables: vars, Functions: tfFunctions()}, nil
}

func (e *tfEval) local(name string) (cty.Value, error) {
	if v, ok := e.values[name]; ok {
		return v, nil
	}
	expr, ok := e.locals[name]
	if !ok {
		return cty.NilVal, fmt.Errorf("local.%s is not declared in module %s", name, e.m.dir)
	}
	if e.busy[name] {
		return cty.NilVal, fmt.Errorf("local.%s refers to itself", name)
	}
	e.busy[name] = true
	defer delete(e.busy, name)
	v, err := e.eval(expr)
	if err != nil {
		return cty.NilVal, fmt.Errorf("local.%s: %w", name, err)
	}
	e.values[name] = v
	return v, nil
}

// configured returns TYPE.NAME.ATTR of a managed resource (without count or
// for_each) from the argument ATTR of its configuration.
func (e *tfEval) configured(ref string) (cty.Value, error) {
	names := strings.Split(ref, ".")
	if len(names) == 3 && !strings.Contains(ref, "[") {
		for _, f := range e.m.files {
			for _, b := range f.body.Blocks {
				if b.Type != "resource" || len(b.Labels) != 2 || b.Labels[0] != names[0] || b.Labels[1] != names[1] {
					continue
				}
				_, hasCount := b.Body.Attributes["count"]
				_, hasForEach := b.Body.Attributes["for_each"]
				if a, ok := b.Body.Attributes[names[2]]; ok && !hasCount && !hasForEach {
					v, err := e.eval(a.Expr)
					if err != nil {
						return cty.NilVal, fmt.Errorf("%s (from %s): %w", ref, where(f.path, a.SrcRange.Ptr()), err)
					}
					return v, nil
				}
			}
		}
	}
	return cty.NilVal, fmt.Errorf("reference %s: neither configured nor sampled; give the test a sample for it", ref)
}

// tfFunctions are the Terraform functions the pool module's evaluated
// expressions call, with Terraform's semantics for the arguments it uses.
func tfFunctions() map[string]function.Function {
	return map[string]function.Function{
		"alltrue":     alltrueFunc,
		"can":         tryfunc.CanFunc,
		"cidrnetmask": cidrnetmaskFunc,
		"coalesce":    stdlib.CoalesceFunc,
		"concat":      stdlib.ConcatFunc,
		"contains":    stdlib.ContainsFunc,
		"distinct":    stdlib.DistinctFunc,
		"floor":       stdlib.FloorFunc,
		"format":      stdlib.FormatFunc,
		"join":        stdlib.JoinFunc,
		"jsonencode":  stdlib.JSONEncodeFunc,
		"keys":        stdlib.KeysFunc,
		"length":      stdlib.LengthFunc,
		"lookup":      stdlib.LookupFunc,
		"max":         stdlib.MaxFunc,
		"merge":       stdlib.MergeFunc,
		"regex":       stdlib.RegexFunc,
		"replace":     stdlib.ReplaceFunc, // Terraform's, for a substring not written /like this/
		"setproduct":  stdlib.SetProductFunc,
		"startswith":  startswithFunc,
		"trimprefix":  stdlib.TrimPrefixFunc,
		"values":      stdlib.ValuesFunc,
	}
}

var alltrueFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		for _, v := range args[0].AsValueSlice() {
			if v.IsNull() || v.False() {
				return cty.False, nil
			}
		}
		return cty.True, nil
	},
})

var startswithFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "string", Type: cty.String}, {Name: "prefix", Type: cty.String}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.BoolVal(strings.HasPrefix(args[0].AsString(), args[1].AsString())), nil
	},
})

var cidrnetmaskFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "prefix", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		_, n, err := net.ParseCIDR(args[0].AsString())
		if err != nil {
			return cty.NilVal, err
		}
		if n.IP.To4() == nil {
			return cty.NilVal, fmt.Errorf("%s is not an IPv4 prefix", args[0].AsString())
		}
		return cty.StringVal(net.IP(n.Mask).String()), nil
	},
})

// TestPoolVariableValidations checks that every validation of the pool's
// variables accepts the defaults (and the values tests use for the required
// variables), and rejects the mistakes it is there to catch.
func TestPoolVariableValidations(t *testing.T) {
	m := poolModule(t)
	rejects := []struct {
		name  string
		value cty.Value
	}{
		{"pool_name", cty.StringVal("GPU")},
		{"pool_name", cty.StringVal("gpu_pool")},
		{"checkpoint_bucket", cty.StringVal("s3://hpsearch-checkpoints")},
		{"checkpoint_prefix", cty.StringVal("/hpsearch/")},
		{"worker_binary_url", cty.StringVal("http://example.com/hpsearch")},
		{"worker_binary_url", cty.StringVal("s3://bucket-only")},
		{"worker_binary_sha256", cty.StringVal("ABC123")},
		{"worker_args", cty.ListVal([]cty.Value{cty.StringVal("--x\n--y")})},
		{"worker_environment", cty.MapVal(map[string]cty.Value{"NOT-A-NAME": cty.StringVal("x")})},
		{"architecture", cty.StringVal("amd64")},
		{"ami_id", cty.StringVal("ubuntu")},
		{"instance_types", cty.ListValEmpty(cty.String)},
		{"instance_types", cty.ListVal([]cty.Value{cty.StringVal("g5.xlarge"), cty.StringVal("g5.xlarge")})},
		{"instance_types", cty.ListVal([]cty.Value{cty.StringVal("g5.xlarge); rm -rf /")})},
		{"price_per_hour", cty.NumberFloatVal(0)},
		{"visibility_timeout_seconds", cty.NumberIntVal(43201)},
		{"egress_ports", cty.ListVal([]cty.Value{cty.NumberIntVal(70000)})},
		{"egress_cidr_blocks", cty.ListVal([]cty.Value{cty.StringVal("10.0.0.1")})},
		{"max_size", cty.NumberIntVal(0)},
		{"on_demand_percentage_above_base", cty.NumberIntVal(101)},
		{"log_retention_days", cty.NumberIntVal(10)},
	}
	// validate evaluates var.name's validations with value (or its default,
	// when value is cty.NilVal) and returns whether all hold.
	validate := func(t *testing.T, name string, value cty.Value) bool {
		t.Helper()
		set := maps(poolRequired)
		if value != cty.NilVal {
			set[name] = value
		}
		e, err := newTFEval(m, set, nil)
		if err != nil {
			t.Fatal(err)
		}
		ok, found := true, false
		for _, f := range m.files {
			for _, b := range f.body.Blocks {
				if b.Type != "variable" || len(b.Labels) != 1 || b.Labels[0] != name {
					continue
				}
				for _, vb := range b.Body.Blocks {
					if vb.Type != "validation" {
						continue
					}
					found = true
					cond := vb.Body.Attributes["condition"]
					v, err := e.eval(cond.Expr)
					if err != nil {
						t.Fatalf("%s: validation of %q: %v", where(f.path, cond.SrcRange.Ptr()), name, err)
					}
					if v.IsNull() || !v.IsKnown() || v.Type() != cty.Bool {
						t.Fatalf("%s: validation of %q is %#v, want true or false", where(f.path, cond.SrcRange.Ptr()), name, v)
					}
					ok = ok && v.True()
				}
			}
		}
		if !found {
			t.Fatalf("variable %q has no validation", name)
		}
		return ok
	}
	for _, f := range m.files {
		for _, b := range f.body.Blocks {
			if b.Type != "variable" || len(b.Labels) != 1 || !slices.ContainsFunc(b.Body.Blocks, func(vb *hclsyntax.Block) bool { return vb.Type == "validation" }) {
				continue
			}
			name := b.Labels[0]
			if !validate(t, name, cty.NilVal) {
				t.Errorf("%s: variable %q: its validation rejects the default (or the tests' value %#v)", where(f.path, b.DefRange().Ptr()), name, poolRequired[name])
			}
		}
	}
	for _, r := range rejects {
		if validate(t, r.name, r.value) {
			t.Errorf("variable %q: its validation accepts %#v", r.name, r.value)
		}
	}
}

func maps(in map[string]cty.Value) map[string]cty.Value {
	out := make(map[string]cty.Value, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// poolSection is the space file's pool section.
type poolSection struct {
	Name         string  `yaml:"name"`
	Queue        string  `yaml:"queue"`
	InstanceType string  `yaml:"instance_type"`
	PricePerHour float64 `yaml:"price_per_hour"`
}

// TestPoolSpaceYAML renders space_yaml_pool for several sets of variables
// and checks that it is exactly the space file's pool section, with the
// values it should have; once internal/spec decodes a pool section
// (Spec.Pool), the decoder must accept it too.
func TestPoolSpaceYAML(t *testing.T) {
	m := poolModule(t)
	attr, path := findOutput(m, "space_yaml_pool")
	if attr == nil {
		t.Fatalf("module %s has no output space_yaml_pool", m.dir)
	}
	at := where(path, attr.SrcRange.Ptr())
	cases := []struct {
		name string
		set  map[string]cty.Value
		want poolSection
	}{
		{"defaults", nil, poolSection{"gpu", "sqs://hpsearch-gpu?records=hpsearch-checkpoints-sample&region=us-east-1", "g5.xlarge", 1.006}},
		{"cheaper types: the dearest one's price", map[string]cty.Value{
			"instance_types": cty.ListVal([]cty.Value{cty.StringVal("g4dn.xlarge"), cty.StringVal("g6.xlarge")}),
		}, poolSection{"gpu", "sqs://hpsearch-gpu?records=hpsearch-checkpoints-sample&region=us-east-1", "g4dn.xlarge", 0.8048}},
		{"own name and price", map[string]cty.Value{
			"name": cty.StringVal("team-a"), "pool_name": cty.StringVal("big"),
			"instance_types": cty.ListVal([]cty.Value{cty.StringVal("p4d.24xlarge")}),
			"price_per_hour": cty.NumberFloatVal(32.7726),
		}, poolSection{"big", "sqs://team-a-big?records=hpsearch-checkpoints-sample&region=us-east-1", "p4d.24xlarge", 32.7726}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := maps(poolRequired)
			for k, v := range c.set {
				set[k] = v
			}
			e, err := newTFEval(m, set, nil)
			if err != nil {
				t.Fatal(err)
			}
			v, err := e.eval(attr.Expr)
			if err != nil {
				t.Fatalf("%s: render space_yaml_pool: %v", at, err)
			}
			if !v.Type().Equals(cty.String) || !v.IsKnown() || v.IsNull() {
				t.Fatalf("%s: space_yaml_pool is %s, want a known string", at, v.Type().FriendlyName())
			}
			text := v.AsString()

			var loose struct {
				Pool map[string]any `yaml:"pool"`
			}
			if err := yaml.UnmarshalWithOptions([]byte(text), &loose, yaml.DisallowUnknownField()); err != nil {
				t.Fatalf("%s: space_yaml_pool is not a pool section alone: %v\n%s", at, err, text)
			}
			checkSection(t, at, "pool", loose.Pool, []string{"name", "queue", "instance_type", "price_per_hour"})
			var doc struct {
				Pool poolSection `yaml:"pool"`
			}
			if err := yaml.UnmarshalWithOptions([]byte(text), &doc, yaml.DisallowUnknownField()); err != nil {
				t.Fatalf("%s: space_yaml_pool: %v\n%s", at, err, text)
			}
			if doc.Pool != c.want {
				t.Errorf("%s: space_yaml_pool decodes to %+v, want %+v\n%s", at, doc.Pool, c.want, text)
			}
			// As the worker and the coordinator open it (internal/cli/sqs.go).
			u, err := url.Parse(doc.Pool.Queue)
			if err != nil || u.Scheme != "sqs" || u.Host == "" || u.Path != "" ||
				u.Query().Get("records") != poolRequired["checkpoint_bucket"].AsString() || u.Query().Get("region") == "" {
				t.Errorf("%s: pool.queue = %q, want sqs://QUEUE?records=CHECKPOINT_BUCKET&region=REGION", at, doc.Pool.Queue)
			}
			checkPoolAgainstSpec(t, at, text, c.want)
		})
	}
}

// checkPoolAgainstSpec decodes the snippet with the space-file decoder once
// spec.Spec has a Pool field, and compares the fields it shares with
// poolSection by name.
func checkPoolAgainstSpec(t *testing.T, at, text string, want poolSection) {
	t.Helper()
	field, ok := reflect.TypeOf(spec.Spec{}).FieldByName("Pool")
	if !ok {
		t.Logf("%s: internal/spec has no pool section yet (no Spec.Pool): the snippet's shape is checked, the decoder will check it once it has one", at)
		return
	}
	s, err := spec.Decode(poolDir+"/space.yaml", []byte(spaceHead+text))
	if err != nil {
		t.Fatalf("%s: the space-file decoder rejects the pool snippet as the rest of a space file:\n%v\n%s", at, err, text)
	}
	pv := reflect.ValueOf(*s).FieldByIndex(field.Index)
	if pv.Kind() == reflect.Pointer {
		if pv.IsNil() {
			t.Fatalf("%s: the decoder left Spec.Pool nil for\n%s", at, text)
		}
		pv = pv.Elem()
	}
	if pv.Kind() != reflect.Struct {
		t.Fatalf("%s: Spec.Pool is a %s; this test compares struct fields", at, pv.Kind())
	}
	wants := map[string]any{"Name": want.Name, "Queue": want.Queue, "InstanceType": want.InstanceType, "PricePerHour": want.PricePerHour}
	for name, w := range wants {
		f := pv.FieldByName(name)
		if !f.IsValid() {
			continue
		}
		var got any = fmt.Sprint(f.Interface())
		if f.Kind() == reflect.Float64 || f.Kind() == reflect.Float32 {
			got = f.Float()
		} else {
			w = fmt.Sprint(w)
		}
		if got != w {
			t.Errorf("%s: decoded Spec.Pool.%s = %v, want %v", at, name, got, w)
		}
	}
}

// TestPoolPreconditions evaluates the preconditions of the pool's
// resources: all hold with the defaults, and each catches its mistake.
func TestPoolPreconditions(t *testing.T) {
	m := poolModule(t)
	list := func(s ...string) cty.Value {
		var vs []cty.Value
		for _, x := range s {
			vs = append(vs, cty.StringVal(x))
		}
		return cty.ListVal(vs)
	}
	cases := []struct {
		name    string
		set     map[string]cty.Value
		samples map[string]cty.Value
		fail    string // a part of the failing precondition's message; "" for none
	}{
		{name: "defaults"},
		{name: "arm64 types on x86_64", set: map[string]cty.Value{"instance_types": list("g5g.xlarge")}, fail: "instance_types must all be x86_64"},
		{name: "x86_64 types on arm64", set: map[string]cty.Value{"architecture": cty.StringVal("arm64")},
			samples: map[string]cty.Value{"data.aws_ami.worker.architecture": cty.StringVal("arm64")}, fail: "instance_types must all be arm64"},
		{name: "arm64", set: map[string]cty.Value{"architecture": cty.StringVal("arm64"), "instance_types": list("g5g.xlarge")},
			samples: map[string]cty.Value{"data.aws_ami.worker.architecture": cty.StringVal("arm64")}},
		{name: "an x86_64 AMI for arm64", set: map[string]cty.Value{"architecture": cty.StringVal("arm64"), "instance_types": list("g5g.xlarge")},
			fail: "is x86_64, but architecture is arm64"},
		{name: "a type without a price", set: map[string]cty.Value{"instance_types": list("g5.xlarge", "p4d.24xlarge")}, fail: "No built-in price for p4d.24xlarge"},
		{name: "a type with a given price", set: map[string]cty.Value{"instance_types": list("p4d.24xlarge"), "price_per_hour": cty.NumberFloatVal(32.7726)}},
		{name: "desired under min", set: map[string]cty.Value{"min_size": cty.NumberIntVal(2), "desired_capacity": cty.NumberIntVal(1)}, fail: "min_size <= desired_capacity"},
		{name: "desired over max", set: map[string]cty.Value{"desired_capacity": cty.NumberIntVal(5)}, fail: "desired_capacity <= max_size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := maps(poolRequired)
			for k, v := range c.set {
				set[k] = v
			}
			e, err := newTFEval(m, set, c.samples)
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			n := 0
			for _, f := range m.files {
				for _, b := range f.body.Blocks {
					for _, lb := range b.Body.Blocks {
						if lb.Type != "lifecycle" {
							continue
						}
						for _, pb := range lb.Body.Blocks {
							if pb.Type != "precondition" {
								continue
							}
							n++
							at := where(f.path, pb.DefRange().Ptr())
							v, err := e.eval(pb.Body.Attributes["condition"].Expr)
							if err != nil {
								t.Fatalf("%s: precondition: %v", at, err)
							}
							if v.True() {
								continue
							}
							msg, err := e.eval(pb.Body.Attributes["error_message"].Expr)
							if err != nil {
								t.Fatalf("%s: precondition's error_message: %v", at, err)
							}
							failed = append(failed, msg.AsString())
						}
					}
				}
			}
			if n == 0 {
				t.Fatalf("module %s has no precondition", m.dir)
			}
			switch {
			case c.fail == "" && len(failed) > 0:
				t.Errorf("preconditions fail: %q", failed)
			case c.fail != "" && (len(failed) != 1 || !strings.Contains(failed[0], c.fail)):
				t.Errorf("preconditions failing: %q; want exactly one, saying %q", failed, c.fail)
			}
		})
	}
}

// TestPoolUserData renders the workers' user data as the module's
// templatefile call would, and checks that the call passes exactly the
// template's variables, that the script fits EC2's 16 KB and passes
// `bash -n` (and shellcheck, when installed), the instance script it
// writes too, and that the worker's command line and environment are
// quoted as systemd reads them.
func TestPoolUserData(t *testing.T) {
	m := poolModule(t)
	e0, err := newTFEval(m, maps(poolRequired), nil)
	if err != nil {
		t.Fatal(err)
	}
	call, ok := e0.locals["user_data"].(*hclsyntax.FunctionCallExpr)
	if !ok || call.Name != "templatefile" || len(call.Args) != 2 {
		t.Fatalf("module %s: local.user_data is not a templatefile(path, {...}) call", m.dir)
	}
	pathVal, err := e0.eval(call.Args[0])
	if err != nil {
		t.Fatalf("templatefile's path: %v", err)
	}
	tplPath := pathVal.AsString()
	src, err := os.ReadFile(tplPath)
	if err != nil {
		t.Fatalf("templatefile's file: %v", err)
	}
	tpl, diags := hclsyntax.ParseTemplate(src, tplPath, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", tplPath, diags.Error())
	}
	obj, ok := call.Args[1].(*hclsyntax.ObjectConsExpr)
	if !ok {
		t.Fatalf("templatefile's variables are not an object literal")
	}
	var passed, used []string
	for _, item := range obj.Items {
		passed = append(passed, hcl.ExprAsKeyword(item.KeyExpr))
	}
	for _, tr := range tpl.Variables() {
		if !slices.Contains(used, tr.RootName()) {
			used = append(used, tr.RootName())
		}
	}
	for _, u := range used {
		if !slices.Contains(passed, u) {
			t.Errorf("%s uses ${%s}, which templatefile does not pass (Terraform would fail)", tplPath, u)
		}
	}
	for _, p := range passed {
		if !slices.Contains(used, p) {
			t.Errorf("templatefile passes %s, which %s does not use", p, tplPath)
		}
	}

	const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		name string
		set  map[string]cty.Value
		want []string // lines the script must have
		not  []string // lines it must not
	}{
		{
			name: "defaults",
			want: []string{
				`binary_url='https://github.com/hpsearch/hpsearch/releases/download/v0.1.0/hpsearch_linux_amd64.tar.gz'`,
				`binary_sha256=''`,
				`ExecStart="/usr/local/bin/hpsearch" "worker" "--pool" "gpu" "--queue" "sqs://hpsearch-gpu?records=hpsearch-checkpoints-sample&region=us-east-1" "--work-dir" "/var/lib/hpsearch/work" "--visibility" "60s" "--spot-notice" --id ${HPSEARCH_INSTANCE_ID} --instance-type ${HPSEARCH_INSTANCE_TYPE} --price-per-hour ${HPSEARCH_PRICE_PER_HOUR}`,
				`g5.xlarge) price_per_hour=1.006 ;;`,
				`g4dn.xlarge) price_per_hour=0.526 ;;`,
				`g6.xlarge) price_per_hour=0.8048 ;;`,
				`AWS_REGION="us-east-1"`,
				`TimeoutStopSec=120`,
				`User=hpsearch`,
				`Restart=always`,
				`		--auto-scaling-group-name 'hpsearch-gpu' --lifecycle-hook-name 'drain' \`,
				`ExecStartPre=/usr/local/libexec/hpsearch/instance may-start`,
			},
			not: []string{`setup_cloudwatch_logs`},
		},
		{
			name: "S3 binary, checksum, logs, odd arguments and environment",
			set: map[string]cty.Value{
				"worker_binary_url":    cty.StringVal("s3://hpsearch-releases/v0.1.0/hpsearch"),
				"worker_binary_sha256": cty.StringVal(sha),
				"cloudwatch_logs":      cty.True,
				"worker_args":          cty.ListVal([]cty.Value{cty.StringVal("--price-per-hour"), cty.StringVal(`50%$HOME "q" \b`)}),
				"worker_environment": cty.MapVal(map[string]cty.Value{
					"HF_HOME": cty.StringVal("/var/lib/hpsearch/hf"),
					"ODD":     cty.StringVal("a \"b\" $c `d` \\e"),
				}),
			},
			want: []string{
				`binary_url='s3://hpsearch-releases/v0.1.0/hpsearch'`,
				`binary_sha256='` + sha + `'`,
				`ExecStart="/usr/local/bin/hpsearch" "worker" "--pool" "gpu" "--queue" "sqs://hpsearch-gpu?records=hpsearch-checkpoints-sample&region=us-east-1" "--work-dir" "/var/lib/hpsearch/work" "--visibility" "60s" "--spot-notice" --id ${HPSEARCH_INSTANCE_ID} --instance-type ${HPSEARCH_INSTANCE_TYPE} --price-per-hour ${HPSEARCH_PRICE_PER_HOUR} "--price-per-hour" "50%%$$HOME \"q\" \\b"`,
				`AWS_REGION="us-east-1"`,
				`HF_HOME="/var/lib/hpsearch/hf"`,
				"ODD=\"a \\\"b\\\" \\$c \\`d\\` \\\\e\"",
				`setup_cloudwatch_logs`,
				`            "log_group_name": "/hpsearch/hpsearch-gpu",`,
			},
		},
	}
	shellcheck, _ := exec.LookPath("shellcheck")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := maps(poolRequired)
			for k, v := range c.set {
				set[k] = v
			}
			e, err := newTFEval(m, set, nil)
			if err != nil {
				t.Fatal(err)
			}
			vars, err := e.eval(call.Args[1])
			if err != nil {
				t.Fatalf("templatefile's variables: %v", err)
			}
			out, diags := tpl.Value(&hcl.EvalContext{Variables: vars.AsValueMap(), Functions: tfFunctions()})
			if diags.HasErrors() {
				t.Fatalf("render %s: %s", tplPath, diags.Error())
			}
			script := out.AsString()
			if !strings.HasPrefix(script, "#!/bin/bash\n") {
				t.Errorf("the user data does not start with #!/bin/bash: cloud-init would not run it as a script")
			}
			// EC2 refuses user data over 16 KB (before base64).
			if len(script) > 16384 {
				t.Errorf("the user data is %d bytes, over EC2's 16384", len(script))
			}
			lines := strings.Split(script, "\n")
			for _, w := range c.want {
				if !slices.Contains(lines, w) {
					t.Errorf("the user data has no line\n\t%s", w)
				}
			}
			for _, n := range c.not {
				if slices.Contains(lines, n) {
					t.Errorf("the user data has the line\n\t%s", n)
				}
			}

			dir := t.TempDir()
			files := map[string]string{"user-data.sh": script}
			instance, ok := heredoc(script, "HPSEARCH_INSTANCE")
			if !ok {
				t.Errorf("the user data writes no instance script (heredoc HPSEARCH_INSTANCE)")
			} else {
				files["instance.sh"] = instance
			}
			for name, body := range files {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command("bash", "-n", p).CombinedOutput(); err != nil {
					t.Errorf("bash -n %s: %v\n%s\n--- rendered:\n%s", name, err, out, body)
				}
				if shellcheck == "" {
					continue
				}
				if out, err := exec.Command(shellcheck, "--severity=warning", "--shell=bash", p).CombinedOutput(); err != nil {
					t.Errorf("shellcheck %s: %v\n%s", name, err, out)
				}
			}
			if shellcheck == "" {
				t.Log("shellcheck is not on PATH: checked with bash -n only")
			}
		})
	}
}

// heredoc returns the body of the first heredoc of script delimited by word.
func heredoc(script, word string) (string, bool) {
	_, rest, ok := strings.Cut(script, "<<'"+word+"'\n")
	if !ok {
		return "", false
	}
	body, _, ok := strings.Cut(rest, "\n"+word+"\n")
	return body + "\n", ok
}

// TestPoolTerraformValidate runs `terraform init -backend=false` and
// `terraform validate` on a copy of the pool module, which checks every
// resource argument against the AWS provider's schema, when terraform is
// installed and the provider is in a local filesystem mirror: the directory
// HPSEARCH_TF_PLUGIN_DIR names, or /opt/tf-plugins. (init cannot download
// providers where the tests run.)
func TestPoolTerraformValidate(t *testing.T) {
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not on PATH")
	}
	mirror := os.Getenv("HPSEARCH_TF_PLUGIN_DIR")
	if mirror == "" {
		mirror = "/opt/tf-plugins"
	}
	if _, err := os.Stat(filepath.Join(mirror, "registry.terraform.io", "hashicorp", "aws")); err != nil {
		t.Skipf("no hashicorp/aws provider in a local mirror (%s; set HPSEARCH_TF_PLUGIN_DIR): terraform validate needs it", mirror)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(poolDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if en.IsDir() || !(strings.HasSuffix(en.Name(), ".tf") || strings.HasSuffix(en.Name(), ".tftpl")) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(poolDir, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, en.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+os.DevNull, "TF_IN_AUTOMATION=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("terraform %s (in a copy of deploy/terraform/%s): %v\n%s", strings.Join(args, " "), poolDir, err, out)
		}
	}
	run("init", "-backend=false", "-input=false", "-no-color", "-plugin-dir="+mirror)
	run("validate", "-no-color")
}
