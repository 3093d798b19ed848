package cloudrun

import (
	"strings"
	"testing"
)

func TestSplitURI(t *testing.T) {
	for _, tc := range []struct {
		uri, dir, key, err string
	}{
		{uri: "s3://bucket/a/b/req.json", dir: "s3://bucket/a/b", key: "req.json"},
		{uri: "s3://bucket/req.json", dir: "s3://bucket", key: "req.json"},
		{uri: "file:///tmp/my%20dir/a%20b.json", dir: "file:///tmp/my%20dir", key: "a b.json"},
		{uri: "file:///req.json", dir: "file:///", key: "req.json"},
		{uri: "file://rel/req.json", dir: "file://rel", key: "req.json"},
		{uri: "rel/dir/req.json", dir: "rel/dir", key: "req.json"},
		{uri: "req.json", dir: ".", key: "req.json"},
		{uri: "s3://bucket", err: "names a bucket"},
		{uri: "file:///tmp/", err: "does not name an object"},
		{uri: "file:///tmp/%zz", err: "escape"},
	} {
		o, err := splitURI(tc.uri)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("splitURI(%q) = %+v, %v; want an error saying %q", tc.uri, o, err, tc.err)
			}
			continue
		}
		if err != nil || o.dir != tc.dir || o.key != tc.key {
			t.Errorf("splitURI(%q) = %q, %q, %v; want %q, %q", tc.uri, o.dir, o.key, err, tc.dir, tc.key)
		}
	}
}
