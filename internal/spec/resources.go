package spec

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultPoolThreshold is the model size above which a trial goes to the
// GPU pool: functions cannot train models over a billion parameters.
const DefaultPoolThreshold = 1e9

// DefaultPoolListen is where `hpsearch run` serves a pool's queue to
// workers when the pool's queue is http.
const DefaultPoolListen = "127.0.0.1:8470"

// PoolPricePerHour are on-demand list prices (USD per hour, AWS us-east-1
// and GCP us-central1, 2025) of common GPU machines, the default price of a pool
// whose instance_type is one of them.
var PoolPricePerHour = map[string]float64{
	"g4dn.xlarge":   0.526,
	"g5.xlarge":     1.006,
	"g5.2xlarge":    1.212,
	"g6.xlarge":     0.8048,
	"p3.2xlarge":    3.06,
	"p4d.24xlarge":  32.7726,
	"p5.48xlarge":   98.32,
	"a2-highgpu-1g": 3.6731,
}

// Resources declares what a trial needs. Placement compares it with the
// function backend's limits and sends a trial that does not fit, or whose
// model is larger than the pool's threshold, to the GPU pool.
type Resources struct {
	// ModelParams is the model's size in parameters, nil when not declared.
	ModelParams *Quantity
	// GPU is how many GPUs a trial needs.
	GPU int
	// MemoryMB is the memory a trial needs; 0 means the backend's.
	MemoryMB int
	// SegmentTime is how long a segment is expected to take: a trial whose
	// segments cannot be shorter than this does not fit a function.
	SegmentTime time.Duration
}

// Quantity is a number that may depend on a trial's parameters: a
// constant, an arithmetic expression over numeric parameters (+, -, *, /,
// parentheses and pow(x, y)), or a table over a categorical parameter.
type Quantity struct {
	// Expr is the expression (a plain number is one too); empty for a table.
	Expr string
	// Table maps the values of a categorical parameter to numbers.
	Table *QuantityTable
}

// QuantityTable maps the values of the categorical parameter Param, written
// as strings, to numbers.
type QuantityTable struct {
	Param  string
	Values map[string]float64
}

// Eval computes the quantity for a trial's parameters.
func (q *Quantity) Eval(params map[string]any) (float64, error) {
	if q.Table != nil {
		v, ok := params[q.Table.Param]
		if !ok {
			return 0, fmt.Errorf("parameter %q is not set", q.Table.Param)
		}
		n, ok := q.Table.Values[fmt.Sprint(v)]
		if !ok {
			return 0, fmt.Errorf("the table over %q has no entry for %v", q.Table.Param, v)
		}
		return n, nil
	}
	e, err := parser.ParseExpr(q.Expr)
	if err != nil {
		return 0, fmt.Errorf("expression %q: %w", q.Expr, err)
	}
	return eval(e, func(name string) (float64, error) {
		v, ok := params[name]
		if !ok {
			return 0, fmt.Errorf("parameter %q is not set", name)
		}
		return toFloat(v)
	})
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case int:
		return float64(x), nil
	case interface{ Float64() (float64, error) }:
		return x.Float64()
	}
	return 0, fmt.Errorf("%v is not a number", v)
}

// eval computes an arithmetic expression; lookup gives identifiers' values.
func eval(e ast.Expr, lookup func(string) (float64, error)) (float64, error) {
	switch n := e.(type) {
	case *ast.BasicLit:
		if n.Kind != token.INT && n.Kind != token.FLOAT {
			return 0, fmt.Errorf("%s is not a number", n.Value)
		}
		return strconv.ParseFloat(n.Value, 64)
	case *ast.Ident:
		return lookup(n.Name)
	case *ast.ParenExpr:
		return eval(n.X, lookup)
	case *ast.UnaryExpr:
		x, err := eval(n.X, lookup)
		switch {
		case err != nil:
			return 0, err
		case n.Op == token.SUB:
			return -x, nil
		case n.Op == token.ADD:
			return x, nil
		}
		return 0, fmt.Errorf("operator %s is not supported; use + - * / ( ) and pow(x, y)", n.Op)
	case *ast.BinaryExpr:
		x, err := eval(n.X, lookup)
		if err != nil {
			return 0, err
		}
		y, err := eval(n.Y, lookup)
		if err != nil {
			return 0, err
		}
		switch n.Op {
		case token.ADD:
			return x + y, nil
		case token.SUB:
			return x - y, nil
		case token.MUL:
			return x * y, nil
		case token.QUO:
			if y == 0 {
				return 0, errors.New("division by zero")
			}
			return x / y, nil
		}
		return 0, fmt.Errorf("operator %s is not supported; use + - * / ( ) and pow(x, y)", n.Op)
	case *ast.CallExpr:
		if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "pow" && len(n.Args) == 2 {
			x, err := eval(n.Args[0], lookup)
			if err != nil {
				return 0, err
			}
			y, err := eval(n.Args[1], lookup)
			if err != nil {
				return 0, err
			}
			return math.Pow(x, y), nil
		}
		return 0, errors.New("the only function is pow(x, y)")
	}
	return 0, errors.New("use numbers, parameter names, + - * / ( ) and pow(x, y)")
}

// Pool is a persistent pool of (GPU) workers that runs the trials that do
// not fit the function backend.
type Pool struct {
	Name string
	// Queue is how workers get jobs: "http" (hpsearch run serves the
	// pool's queue on Listen) or sqs://QUEUE?records=BUCKET[&region=REGION]
	// (the bucket keeps the jobs' records).
	Queue  string
	Listen string
	// InstanceType names the pool's machines; PricePerHour is what one
	// costs per hour, busy or idle.
	InstanceType string
	PricePerHour float64
	// Threshold is the model size above which a trial goes to the pool.
	Threshold float64
}

var (
	resourcesKeys = []string{"model_params", "gpu", "memory_mb", "segment_time"}
	poolKeys      = []string{"name", "queue", "listen", "instance_type", "price_per_hour", "threshold"}
)

// resources decodes the optional resources section.
func (d *decoder) resources(root *object, params []Param) Resources {
	var r Resources
	o, ok := d.section(root, "resources", resourcesKeys)
	if !ok {
		return r
	}
	if f, ok := o.get("model_params"); ok {
		r.ModelParams = d.quantity(f, params)
	}
	if f, ok := o.get("gpu"); ok {
		r.GPU, _ = d.intIn(f, 0, 64)
	}
	if f, ok := o.get("memory_mb"); ok {
		r.MemoryMB, _ = d.intIn(f, 0, 16<<20)
	}
	if f, ok := o.get("segment_time"); ok {
		r.SegmentTime = d.nonNegativeDuration(f)
	}
	return r
}

// quantity decodes a number, an expression over numeric parameters or a
// table {param: NAME, values: {VALUE: NUMBER, ...}} over a categorical one.
func (d *decoder) quantity(f field, params []Param) *Quantity {
	v, ok := d.value(f)
	if !ok {
		return nil
	}
	switch x := v.(type) {
	case int64, float64:
		n, ok := d.nonNegative(f)
		if !ok {
			return nil
		}
		return &Quantity{Expr: strconv.FormatFloat(n, 'g', -1, 64)}
	case string:
		e, err := parser.ParseExpr(x)
		if err != nil {
			d.errorf(f.pos(), "%s: %q is not an expression: %v; write e.g. \"12 * layers * pow(hidden_size, 2)\"", f.label, x, firstLine(err.Error()))
			return nil
		}
		_, err = eval(e, func(name string) (float64, error) {
			i := slices.IndexFunc(params, func(p Param) bool { return p.Name == name })
			switch {
			case i < 0:
				return 0, fmt.Errorf("no parameter %q%s", name, didYouMean(name, paramNames(params)))
			case !numeric(params[i]):
				return 0, fmt.Errorf("parameter %q is not numeric; use a table for a categorical one", name)
			}
			return 1, nil
		})
		if err != nil && err.Error() != "division by zero" {
			d.errorf(f.pos(), "%s: %v", f.label, err)
			return nil
		}
		return &Quantity{Expr: x}
	}
	return d.quantityTable(f, params)
}

func (d *decoder) quantityTable(f field, params []Param) *Quantity {
	o, ok := d.object(f, f.label, f.label+".")
	if !ok {
		return nil
	}
	d.checkKeys(o, []string{"param", "values"})
	pf, ok1 := d.require(o, "param", "name the categorical parameter the table is over")
	vf, ok2 := d.require(o, "values", "map each of its values to a number")
	if !ok1 || !ok2 {
		return nil
	}
	name, ok := d.name(pf)
	if !ok {
		return nil
	}
	i := slices.IndexFunc(params, func(p Param) bool { return p.Name == name })
	if i < 0 || params[i].Type != Categorical {
		d.errorf(pf.pos(), "%s: %q is not a categorical parameter%s", pf.label, name, didYouMean(name, paramNames(params)))
		return nil
	}
	vo, ok := d.object(vf, vf.label, vf.label+".")
	if !ok {
		return nil
	}
	t := &QuantityTable{Param: name, Values: map[string]float64{}}
	for _, e := range vo.fields {
		if n, ok := d.nonNegative(e); ok {
			t.Values[e.name] = n
		}
	}
	for _, v := range params[i].Values {
		if _, ok := t.Values[fmt.Sprint(v)]; !ok {
			d.errorf(vf.pos(), "%s has no entry for %v, a value of %s", vf.label, v, name)
		}
	}
	return &Quantity{Table: t}
}

func numeric(p Param) bool {
	switch p.Type {
	case Float, Int:
		return true
	case Constant:
		_, err := toFloat(p.Value)
		return err == nil
	case Categorical:
		for _, v := range p.Values {
			if _, err := toFloat(v); err != nil {
				return false
			}
		}
		return true
	}
	return false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// pool decodes the optional pool section.
func (d *decoder) pool(root *object) *Pool {
	o, ok := d.section(root, "pool", poolKeys)
	if !ok {
		return nil
	}
	p := &Pool{Queue: "http", Listen: DefaultPoolListen, Threshold: DefaultPoolThreshold}
	if f, ok := d.require(o, "name", "name the pool, e.g. name: gpu"); ok {
		if s, ok := d.name(f); ok && !gcpName.MatchString(s) {
			d.errorf(f.pos(), "%s %q: use lower-case letters, digits and -, starting with a letter", f.label, s)
		} else {
			p.Name = s
		}
	}
	if f, ok := o.get("queue"); ok {
		s, _ := d.name(f)
		u, err := url.Parse(s)
		switch {
		case s == "http":
		case err != nil || u.Scheme != "sqs":
			d.errorf(f.pos(), "%s must be http (hpsearch run serves it to workers) or sqs://QUEUE?records=BUCKET, got %q", f.label, s)
		case u.Host == "" || u.Query().Get("records") == "":
			d.errorf(f.pos(), "%s %q needs the queue's name and records=BUCKET, the S3 bucket that keeps the jobs' records: sqs://QUEUE?records=BUCKET[&region=REGION]", f.label, s)
		}
		p.Queue = s
	}
	if f, ok := o.get("listen"); ok {
		p.Listen, _ = d.name(f)
		if _, port, err := net.SplitHostPort(p.Listen); err != nil || port == "0" || port == "" {
			d.errorf(f.pos(), "%s %q must be HOST:PORT with a fixed port, where workers reach the queue, e.g. 127.0.0.1:8470 or 0.0.0.0:8470", f.label, p.Listen)
		}
	}
	if f, ok := o.get("instance_type"); ok {
		p.InstanceType, _ = d.name(f)
	}
	price, known := PoolPricePerHour[p.InstanceType]
	if f, ok := o.get("price_per_hour"); ok {
		price, known = d.nonNegative(f)
	}
	if !known && p.InstanceType != "" {
		f, _ := o.get("instance_type")
		d.errorf(f.pos(), "%s %q has no default price; add price_per_hour", f.label, p.InstanceType)
	} else if !known {
		d.errorf(o.pos, "pool needs instance_type (e.g. g5.xlarge, whose price is known) or price_per_hour")
	}
	p.PricePerHour = price
	if f, ok := o.get("threshold"); ok {
		p.Threshold, _ = d.nonNegative(f)
	}
	return p
}

// checkFits reports resources that no trial can get from the backend when
// there is no pool to send it to.
func (d *decoder) checkFits(root *object, s *Spec) {
	f, ok := root.get("resources")
	if !ok {
		return
	}
	if why := s.Backend.Refuses(s.Resources); why != "" {
		d.errorf(f.pos(), "resources: %s, and there is no pool to send trials to; add a pool section or lower the resources", why)
	}
}

// Refuses says why the backend cannot run a trial needing r, or "" when
// it can. Model size is the pool threshold's business, not the backend's.
func (b Backend) Refuses(r Resources) string {
	gpus := 0
	if b.Type == CloudRun {
		gpus = b.GPUs
	}
	limit := map[BackendType]time.Duration{Lambda: LambdaMaxRuntime, CloudRun: CloudRunMaxRuntime}[b.Type]
	switch {
	case r.GPU > gpus:
		return fmt.Sprintf("a trial needs %d GPU(s) and the %s backend has %d", r.GPU, b.Type, gpus)
	case r.MemoryMB > b.MemoryMB:
		return fmt.Sprintf("a trial needs %d MB and the %s backend has %d MB (backend.memory_mb)", r.MemoryMB, b.Type, b.MemoryMB)
	case limit > 0 && r.SegmentTime > limit:
		return fmt.Sprintf("a segment takes %s and a %s segment may last at most %s", r.SegmentTime, b.Type, limit)
	}
	return ""
}
