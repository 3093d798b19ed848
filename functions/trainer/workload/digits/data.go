package digits

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
)

// digitsCSV is the UCI digits test set as scikit-learn ships it; see
// data/README.md for its origin and licence.
//
//go:embed data/digits.csv.gz
var digitsCSV []byte

// Shape of the data set.
const (
	inputs    = 64 // 8x8 pixels
	classes   = 10
	maxPixel  = 16
	numRows   = 1797
	valSize   = 360
	trainSize = numRows - valSize // 1437
)

// splitSeed fixes the train/validation split. It is independent of the trial
// seed so that every trial is evaluated on the same validation images.
const splitSeed = 0x5eed_d161

// split is a set of images with their labels.
type split struct {
	x []float64 // n rows of `inputs` pixels scaled to [0, 1], row-major
	y []int     // n labels in 0..classes-1
}

func (s *split) len() int { return len(s.y) }

// row returns the pixels of image i.
func (s *split) row(i int) []float64 { return s.x[i*inputs : (i+1)*inputs : (i+1)*inputs] }

// dataset is the embedded data, split once for the life of the process.
type dataset struct {
	train, val split
}

// loadData parses the embedded data set the first time it is called and
// returns the same read-only dataset afterwards.
var loadData = sync.OnceValues(func() (*dataset, error) {
	x, y, err := parse(digitsCSV)
	if err != nil {
		return nil, fmt.Errorf("%s: embedded data set data/digits.csv.gz: %w (the binary was built from a damaged copy; restore it from git)", Name, err)
	}
	return stratifiedSplit(x, y), nil
})

// parse reads the gzip-compressed CSV: numRows rows of `inputs` pixel counts
// in 0..maxPixel followed by a label.
func parse(gz []byte) (x []float64, y []int, err error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, nil, err
	}
	r := csv.NewReader(zr)
	r.FieldsPerRecord = inputs + 1
	r.ReuseRecord = true
	x = make([]float64, 0, numRows*inputs)
	y = make([]int, 0, numRows)
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		line := len(y) + 1
		for i, field := range rec[:inputs] {
			v, err := strconv.Atoi(field)
			if err != nil || v < 0 || v > maxPixel {
				return nil, nil, fmt.Errorf("line %d, column %d: pixel %q is not an integer in 0..%d", line, i+1, field, maxPixel)
			}
			x = append(x, float64(v)/maxPixel)
		}
		label, err := strconv.Atoi(rec[inputs])
		if err != nil || label < 0 || label >= classes {
			return nil, nil, fmt.Errorf("line %d: label %q is not an integer in 0..%d", line, rec[inputs], classes-1)
		}
		y = append(y, label)
	}
	if err := zr.Close(); err != nil {
		return nil, nil, err
	}
	if len(y) != numRows {
		return nil, nil, fmt.Errorf("%d rows, want %d", len(y), numRows)
	}
	return x, y, nil
}

// stratifiedSplit puts valSize images in the validation split, about a fifth
// of each class, and the rest in the training split. Within a class the
// images are picked after a shuffle with a fixed seed, so the split is the
// same in every process; the shuffle is written out here rather than taken
// from math/rand so that it cannot change with the Go release.
func stratifiedSplit(x []float64, y []int) *dataset {
	byClass := make([][]int, classes)
	for i, label := range y {
		byClass[label] = append(byClass[label], i)
	}
	src := rand.NewPCG(splitSeed, splitSeed)
	order := make([]int, 0, len(y))
	for _, idx := range byClass {
		for i := len(idx) - 1; i > 0; i-- {
			j := int(src.Uint64() % uint64(i+1))
			idx[i], idx[j] = idx[j], idx[i]
		}
		order = append(order, idx...)
	}
	// Systematic sampling over the class-sorted order takes valSize images,
	// spread evenly over the classes.
	d := &dataset{
		train: split{x: make([]float64, 0, trainSize*inputs), y: make([]int, 0, trainSize)},
		val:   split{x: make([]float64, 0, valSize*inputs), y: make([]int, 0, valSize)},
	}
	for k, i := range order {
		s := &d.train
		if (k+1)*valSize/len(order) > k*valSize/len(order) {
			s = &d.val
		}
		s.x = append(s.x, x[i*inputs:(i+1)*inputs]...)
		s.y = append(s.y, y[i])
	}
	return d
}
