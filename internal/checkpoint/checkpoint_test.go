package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob"
)

func TestIDStringParse(t *testing.T) {
	for _, tc := range []struct {
		id   ID
		want string
	}{
		{ID{0, 0, 0}, "000000.000.0000"},
		{ID{3, 1, 2}, "000003.001.0002"},
		{ID{999999, 999, 9999}, "999999.999.9999"},
	} {
		if got := tc.id.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.id, got, tc.want)
		}
		got, err := ParseID(tc.want)
		if err != nil || got != tc.id {
			t.Errorf("ParseID(%q) = %v, %v; want %v", tc.want, got, err, tc.id)
		}
	}
	for _, bad := range []string{"", "3.1.2", "000003.001.002", "000003.001.00002", "000003-001-0002",
		"00000a.001.0002", "000003.001.0002.", "+00003.001.0002", "000003.001", "000003.001.0002/x"} {
		if id, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) = %v, want an error", bad, id)
		}
	}
	for _, bad := range []ID{{-1, 0, 0}, {1000000, 0, 0}, {0, -1, 0}, {0, 1000, 0}, {0, 0, -1}, {0, 0, 10000}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%#v.Validate() = nil, want an error", bad)
		}
		if _, err := bad.MarshalText(); err == nil {
			t.Errorf("%#v.MarshalText() succeeded, want an error", bad)
		}
	}
}

// TestIDOrder checks that IDs sort as their strings do, which the layout
// relies on.
func TestIDOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]ID, 500)
	for i := range ids {
		// Small ranges make ties in the leading parts common.
		ids[i] = ID{r.IntN(5) * 99999, r.IntN(3) * 450, r.IntN(4) * 3333}
	}
	for _, a := range ids {
		for _, b := range ids[:50] {
			if got, want := a.Compare(b), strings.Compare(a.String(), b.String()); got != want {
				t.Fatalf("%v.Compare(%v) = %d, but the strings compare %d", a, b, got, want)
			}
		}
	}
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"000003.001.0002", "999999.999.9999", "3.1.2", "00000a.001.0002"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			return
		}
		if id.String() != s {
			t.Fatalf("ParseID(%q) = %v, which prints as %q", s, id, id.String())
		}
		if err := id.Validate(); err != nil {
			t.Fatalf("ParseID(%q) = %v, which does not validate: %v", s, id, err)
		}
	})
}

func TestCheckShardNames(t *testing.T) {
	for _, tc := range []struct {
		names []string
		ok    bool
	}{
		{nil, true},
		{[]string{"weights", "optimizer", "manifest.json", "a/b/c.bin", "a/d"}, true},
		{[]string{"a", "a/b"}, false},
		{[]string{"a/b/c", "a/b"}, false},
		{[]string{"x", "x"}, false},
		{[]string{""}, false},
		{[]string{"/abs"}, false},
		{[]string{"a/../b"}, false},
		{[]string{"a//b"}, false},
		{[]string{"trailing/"}, false},
		{[]string{"./a"}, false},
	} {
		err := checkShardNames(tc.names)
		if (err == nil) != tc.ok {
			t.Errorf("checkShardNames(%q) = %v, want ok=%v", tc.names, err, tc.ok)
		}
	}
}

// TestVerifier feeds the verifier objects that differ from their manifest
// entry, including those a listing would not catch (a shard replaced
// between the listing and the read).
func TestVerifier(t *testing.T) {
	data := []byte("the bytes of a shard")
	sum := sha256.Sum256(data)
	info := ShardInfo{Name: "s", Key: "k", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	problem := func(err error) Problem { return Problem{Shard: "s", Err: err} }
	for _, tc := range []struct {
		name   string
		object []byte
		want   error
	}{
		{"exact", data, nil},
		{"short", data[:5], ErrSizeMismatch},
		{"long", append(slices.Clone(data), 'x'), ErrSizeMismatch},
		{"same size, other bytes", bytes.ToUpper(data), ErrChecksumMismatch},
		{"empty", nil, ErrSizeMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []func(io.Reader) io.Reader{
				func(r io.Reader) io.Reader { return r },
				iotest.OneByteReader,
				iotest.DataErrReader,
			} {
				v := &verifier{r: r(bytes.NewReader(tc.object)), h: sha256.New(), info: info, problem: problem}
				got, err := io.ReadAll(v)
				if tc.want == nil {
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("read %q, %v; want the data and no error", got, err)
					}
					continue
				}
				if !errors.Is(err, tc.want) || v.failed == nil {
					t.Fatalf("error = %v (failed %v), want %v", err, v.failed, tc.want)
				}
				if int64(len(got)) > info.Size {
					t.Fatalf("passed on %d bytes, more than the %d recorded", len(got), info.Size)
				}
			}
		})
	}
	t.Run("read error is not a problem", func(t *testing.T) {
		boom := errors.New("connection reset")
		v := &verifier{r: iotest.ErrReader(boom), h: sha256.New(), info: info, problem: problem}
		if _, err := io.ReadAll(v); !errors.Is(err, boom) || v.failed != nil {
			t.Fatalf("error = %v, failed = %v; want the read error and no problem", err, v.failed)
		}
	})
}

func TestRetentionPlan(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	// dir makes a folder: m says whether it has a manifest; age is the age
	// of its objects.
	dir := func(seg int, m bool, age time.Duration) *stored {
		id := ID{seg, 0, 0}
		st := &stored{id: id, dir: "p/ckpt/" + id.String(), hasManifest: m, newest: now.Add(-age)}
		if m {
			st.objects = append(st.objects, blob.Info{Key: manifestKey(st.dir)})
		}
		st.objects = append(st.objects, blob.Info{Key: shardKey(st.dir, "w")})
		return st
	}
	// Newest first, as scan returns them.
	dirs := []*stored{
		dir(9, false, time.Minute), // a save in flight
		dir(8, true, 0),            // broken
		dir(7, true, 0),            // intact
		dir(6, true, 0),            // broken
		dir(5, true, 0),            // intact
		dir(4, true, 0),            // not read
		dir(3, false, 2*time.Hour), // orphan
		dir(2, true, 0),            // not read
		dir(1, true, 0),            // not read
	}
	verdicts := []verdict{unread, broken, intact, broken, intact, unread, unread, unread, unread}
	for _, tc := range []struct {
		name string
		r    retention
		// kept are the segments of the folders left whole.
		kept []int
	}{
		{"keep 2", retention{keepLast: 2, orphansBefore: now.Add(-time.Hour)}, []int{9, 8, 7, 6, 5}},
		{"keep 2 and 1", retention{keepLast: 2, keep: map[ID]bool{{1, 0, 0}: true}, orphansBefore: now.Add(-time.Hour)}, []int{9, 8, 7, 6, 5, 1}},
		{"keep 1", retention{keepLast: 1, orphansBefore: now.Add(-time.Hour)}, []int{9, 8, 7}},
		{"young orphans", retention{keepLast: 2, orphansBefore: now.Add(-3 * time.Hour)}, []int{9, 8, 7, 6, 5, 3}},
		{"finish keeping newest", retention{keepLast: 1, dropBroken: true, orphansBefore: now.Add(time.Hour)}, []int{7}},
		{"finish keeping none", retention{dropBroken: true, orphansBefore: now.Add(time.Hour)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifests, rest := tc.r.plan(dirs, verdicts)
			deleted := map[string]bool{}
			for _, k := range manifests {
				if !strings.HasSuffix(k, "/"+manifestName) {
					t.Errorf("manifests to delete first has %s", k)
				}
				deleted[k] = true
			}
			for _, k := range rest {
				if strings.HasSuffix(k, "/"+manifestName) {
					t.Errorf("objects to delete after the manifests has %s", k)
				}
				deleted[k] = true
			}
			var kept []int
			for _, st := range dirs {
				n := 0
				for _, o := range st.objects {
					if deleted[o.Key] {
						n++
					}
				}
				switch n {
				case 0:
					kept = append(kept, st.id.Segment)
				case len(st.objects):
				default:
					t.Errorf("%s: %d of its %d objects deleted", st.id, n, len(st.objects))
				}
			}
			if !slices.Equal(kept, tc.kept) {
				t.Errorf("kept %v, want %v", kept, tc.kept)
			}
		})
	}
}
