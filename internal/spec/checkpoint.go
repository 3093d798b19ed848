package spec

import (
	"regexp"
	"strings"
	"time"
)

var checkpointKeys = []string{"store", "every", "grace", "keep_last", "keep_checkpoints"}

// storeURI splits a checkpoint store written as scheme://rest.
var storeURI = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$`)

// minMaxRuntime is the shortest backend.max_runtime other than 0, so that
// the default grace, a tenth of it, is positive.
const minMaxRuntime = time.Second

// checkpoint decodes the optional checkpoint section. Its grace defaults
// from maxRuntime, the backend's.
func (d *decoder) checkpoint(root *object, maxRuntime time.Duration) Checkpoint {
	c := Checkpoint{Every: DefaultCheckpointEvery, KeepLast: DefaultKeepLast, Keep: KeepBest}
	if o, ok := d.section(root, "checkpoint", checkpointKeys); ok {
		d.checkpointFields(o, &c, maxRuntime)
	}
	c.Grace = c.GraceOrDefault(maxRuntime)
	return c
}

func (d *decoder) checkpointFields(o *object, c *Checkpoint, maxRuntime time.Duration) {
	if f, ok := o.get("store"); ok {
		c.Store = d.store(f)
	}
	if f, ok := o.get("every"); ok {
		c.Every = d.positiveDuration(f)
	}
	if f, ok := o.get("grace"); ok {
		c.Grace = d.positiveDuration(f)
		if maxRuntime > 0 && c.Grace >= maxRuntime {
			d.errorf(f.pos(), "%s (%s) must be shorter than backend.max_runtime (%s), or no time is left to train", f.label, c.Grace, maxRuntime)
		}
	}
	if f, ok := o.get("keep_last"); ok {
		n, _ := d.intIn(f, 1, maxInt)
		c.KeepLast = n
	}
	if f, ok := o.get("keep_checkpoints"); ok {
		keep, _ := d.enum(f, string(KeepBest), string(KeepAll), string(KeepNone))
		c.Keep = KeepPolicy(keep)
	}
}

// store decodes checkpoint.store: a path, file:///path or
// s3://bucket/prefix.
func (d *decoder) store(f field) string {
	s, ok := d.name(f)
	m := storeURI.FindStringSubmatch(s)
	if !ok || m == nil {
		return s
	}
	scheme, rest := m[1], m[2]
	switch {
	case scheme != "file" && scheme != "s3":
		d.errorf(f.pos(), "%s: unknown scheme %q; use a path, file:///path or s3://bucket/prefix", f.label, scheme)
	case scheme == "file" && rest == "":
		d.errorf(f.pos(), "%s: file:// needs a path, e.g. file:///var/hpsearch/checkpoints", f.label)
	case scheme == "s3" && strings.SplitN(rest, "/", 2)[0] == "":
		d.errorf(f.pos(), "%s: s3:// needs a bucket, e.g. s3://my-bucket/checkpoints", f.label)
	}
	return s
}

// maxRuntime decodes backend.max_runtime: 0 for no bound, or at least
// minMaxRuntime.
func (d *decoder) maxRuntime(f field) time.Duration {
	t, ok := d.duration(f)
	if ok && t != 0 && t < minMaxRuntime {
		d.errorf(f.pos(), "%s must be 0 (no bound) or at least %s, got %s", f.label, minMaxRuntime, t)
	}
	return t
}
