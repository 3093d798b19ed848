// Package terraform_test checks the Terraform modules under deploy/terraform
// without providers (which cannot be downloaded where the tests run, so
// `terraform init` and `terraform validate` are out of reach): every .tf file
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
	"fmt"
	"io/fs"
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
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

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
var wantModules = []string{"aws", "gcp"}

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
