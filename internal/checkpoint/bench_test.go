package checkpoint_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hpsearch/hpsearch/internal/checkpoint"
)

const (
	benchShards    = 8
	benchShardSize = 32 << 20
	benchBytes     = benchShards * benchShardSize // 256 MiB
)

// benchData is the random content of the benchmark's shards, made once.
var benchData = sync.OnceValue(func() [][]byte {
	data := make([][]byte, benchShards)
	for i := range data {
		data[i] = content(benchShardSize, uint64(i))
	}
	return data
})

// BenchmarkSaveRestore saves and restores a 256 MiB checkpoint of 8
// shards on every backend (S3 when an endpoint is configured), next to a
// baseline: the same bytes written to one file in sequence and fsynced.
// Restore writes the shards into a directory, as for a command workload.
func BenchmarkSaveRestore(b *testing.B) {
	data := benchData()
	shards := make([]checkpoint.Shard, len(data))
	for i, d := range data {
		shards[i] = checkpoint.BytesShard(fmt.Sprintf("shard-%d", i), d)
	}
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			ctx := b.Context()
			b.Run("save", func(b *testing.B) {
				s := checkpoint.New(be.new(b))
				b.SetBytes(benchBytes)
				b.ReportAllocs()
				seq := 0
				for b.Loop() {
					if _, err := s.Save(ctx, prefix, checkpoint.Manifest{ID: checkpoint.ID{Seq: seq}}, shards); err != nil {
						b.Fatal(err)
					}
					seq++
					b.StopTimer()
					if err := s.Finish(ctx, prefix, false); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
			b.Run("restore", func(b *testing.B) {
				s := checkpoint.New(be.new(b))
				if _, err := s.Save(ctx, prefix, checkpoint.Manifest{ID: checkpoint.ID{Segment: 1}}, shards); err != nil {
					b.Fatal(err)
				}
				dir := b.TempDir()
				b.SetBytes(benchBytes)
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					dst := &checkpoint.Dir{Path: filepath.Join(dir, fmt.Sprint(n))}
					n++
					if _, _, err := s.Latest(ctx, prefix, dst); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if err := os.RemoveAll(dst.Path); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		})
	}
	b.Run("baseline-write-fsync", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "baseline")
		b.SetBytes(benchBytes)
		for b.Loop() {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			for _, d := range data {
				if _, err := f.Write(d); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := os.Remove(path); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}
