package digits

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
)

// A checkpoint of a Run is three shards, the values of the map that Save
// returns:
//
//   - ShardWeights: the network's weights and biases;
//   - ShardOptimizer: the SGD momentum buffers, one per weight and bias;
//   - ShardState: a JSON object with everything else that decides the epochs
//     to come (the epoch counter, the random number generator, the order of
//     the training images) and what makes the checkpoint safe to resume (the
//     format version, the configuration and data it was made with, and
//     checksums).
//
// The two binary shards share one layout, all integers little-endian:
//
//	offset  size  field
//	0       4     magic "HPDM"
//	4       4     format version (uint32, 1)
//	8       4     kind (uint32): 1 weights, 2 momentum
//	12      4     inputs (uint32, 64)
//	16      4     hidden units (uint32)
//	20      4     classes (uint32, 10)
//	24      4     epoch (uint32)
//	28      8*n   n float64 values: w1 (inputs x hidden, input-major), b1
//	              (hidden), w2 (hidden x classes, unit-major), b2 (classes)
//	28+8n   4     CRC-32C (Castagnoli) of every byte before it
//
// The state shard is a JSON object with the fields of stateShard. Its
// "crc32c" is the CRC-32C of the object encoded by encoding/json with
// "crc32c" set to 0, and it records the CRC-32C trailers of the binary
// shards, so that Restore detects damage to any shard and shards mixed from
// different checkpoints.
const (
	ShardWeights   = "weights"
	ShardOptimizer = "optimizer"
	ShardState     = "state"
)

// formatVersion is the version of the checkpoint format above. It changes
// whenever the format or the training algorithm does, since either would
// make a resumed run differ from one that never stopped.
const formatVersion = 1

// Errors that Restore's errors wrap.
var (
	// ErrBadCheckpoint means a shard is missing, truncated or corrupted, or
	// the shards do not come from one Save. An earlier checkpoint of the same
	// run may still be good.
	ErrBadCheckpoint = errors.New("damaged checkpoint")
	// ErrCheckpointMismatch means the checkpoint is intact but was made by a
	// run that differs from this one: another configuration or seed, another
	// data set or another checkpoint format. Resuming it would not continue
	// this run.
	ErrCheckpointMismatch = errors.New("checkpoint of a different run")
)

// Layout of the binary shards.
const (
	shardMagic  = "HPDM"
	headerSize  = 28
	trailerSize = 4
)

// Kinds of binary shard.
const (
	kindWeights  = 1
	kindMomentum = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// dataChecksum is the CRC-32C of the embedded data set, recorded in a
// checkpoint so that a trainer built with other data refuses it.
var dataChecksum = sync.OnceValue(func() uint32 { return crc32.Checksum(digitsCSV, castagnoli) })

// stateShard is the JSON object in the state shard.
type stateShard struct {
	Format   int         `json:"format"`
	Workload string      `json:"workload"`
	Config   fingerprint `json:"config"`
	// DataCRC is the CRC-32C of the embedded data set file.
	DataCRC uint32 `json:"data_crc32c"`
	// Epoch is the number of epochs completed.
	Epoch int `json:"epoch"`
	// RNG is the state of the PCG generator, as its MarshalBinary writes it.
	RNG []byte `json:"rng"`
	// Order is the order of the training images after the last epoch's
	// shuffle; the next epoch shuffles it again.
	Order []int `json:"order"`
	// WeightsCRC and OptimizerCRC are the trailers of the binary shards.
	WeightsCRC   uint32 `json:"weights_crc32c"`
	OptimizerCRC uint32 `json:"optimizer_crc32c"`
	// CRC is the checksum of this object; see the comment on the Shard
	// constants.
	CRC uint32 `json:"crc32c"`
}

// fingerprint is the part of a Config that decides the course of training,
// with the parameter names of a space file. Epochs is left out: it only says
// when to stop, so a run may resume with a larger target.
type fingerprint struct {
	LearningRate float64 `json:"learning_rate"`
	HiddenUnits  int     `json:"hidden_units"`
	WeightDecay  float64 `json:"weight_decay"`
	BatchSize    int     `json:"batch_size"`
	Momentum     float64 `json:"momentum"`
	Seed         int64   `json:"seed"`
}

func fingerprintOf(c Config) fingerprint {
	return fingerprint{
		LearningRate: c.LearningRate,
		HiddenUnits:  c.HiddenUnits,
		WeightDecay:  c.WeightDecay,
		BatchSize:    c.BatchSize,
		Momentum:     c.Momentum,
		Seed:         c.Seed,
	}
}

// diff returns an error naming the first field in which the checkpoint's
// fingerprint ck differs from this run's, or nil.
func (ck fingerprint) diff(run fingerprint) error {
	for _, f := range []struct {
		name      string
		was, want any
		same      bool
	}{
		{ParamLearningRate, ck.LearningRate, run.LearningRate, ck.LearningRate == run.LearningRate},
		{ParamHiddenUnits, ck.HiddenUnits, run.HiddenUnits, ck.HiddenUnits == run.HiddenUnits},
		{ParamWeightDecay, ck.WeightDecay, run.WeightDecay, ck.WeightDecay == run.WeightDecay},
		{ParamBatchSize, ck.BatchSize, run.BatchSize, ck.BatchSize == run.BatchSize},
		{ParamMomentum, ck.Momentum, run.Momentum, ck.Momentum == run.Momentum},
		{"seed", ck.Seed, run.Seed, ck.Seed == run.Seed},
	} {
		if !f.same {
			return fmt.Errorf("%w: it was made with %s = %v, this run has %s = %v; resume a trial only from its own checkpoints",
				ErrCheckpointMismatch, f.name, f.was, f.name, f.want)
		}
	}
	return nil
}

// checksum returns the CRC-32C of s encoded with CRC set to 0.
func (s stateShard) checksum() (uint32, error) {
	s.CRC = 0
	data, err := json.Marshal(s)
	if err != nil {
		return 0, err
	}
	return crc32.Checksum(data, castagnoli), nil
}

// Save returns the run's full training state as the shards described on
// ShardWeights. The same state always gives the same bytes.
func (r *Run) Save() (map[string][]byte, error) {
	weights := encodeLayers(kindWeights, r.cfg.HiddenUnits, r.epoch, r.m.param.all)
	optimizer := encodeLayers(kindMomentum, r.cfg.HiddenUnits, r.epoch, r.m.vel.all)
	rng, err := r.pcg.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("%s: save checkpoint: encode the random number generator: %w", Name, err)
	}
	st := stateShard{
		Format:       formatVersion,
		Workload:     Name,
		Config:       fingerprintOf(r.cfg),
		DataCRC:      dataChecksum(),
		Epoch:        r.epoch,
		RNG:          rng,
		Order:        r.order,
		WeightsCRC:   trailer(weights),
		OptimizerCRC: trailer(optimizer),
	}
	if st.CRC, err = st.checksum(); err != nil {
		return nil, fmt.Errorf("%s: save checkpoint: encode the %s shard: %w", Name, ShardState, err)
	}
	state, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("%s: save checkpoint: encode the %s shard: %w", Name, ShardState, err)
	}
	return map[string][]byte{ShardWeights: weights, ShardOptimizer: optimizer, ShardState: state}, nil
}

// Restore replaces the run's state with a checkpoint that Save made, by this
// run's configuration or one that differs only in Epochs. It checks
// everything before it changes anything: on error the Run is as it was.
//
// The error wraps ErrBadCheckpoint when a shard is missing, unexpected,
// truncated or corrupted, or when the shards come from different Saves, and
// ErrCheckpointMismatch, naming the parameter, when the checkpoint was made
// with another configuration, seed, data set or format, or is past this
// run's Epochs.
func (r *Run) Restore(shards map[string][]byte) error {
	return r.restore(shards, false)
}

// Inherit is Restore for a checkpoint another trial made (population-based
// training's exploit): the learning rate, weight decay, batch size,
// momentum and seed may differ from this run's, which then trains on from
// that state with its own; the hidden units, which shape the state, must
// match.
func (r *Run) Inherit(shards map[string][]byte) error {
	return r.restore(shards, true)
}

func (r *Run) restore(shards map[string][]byte, inherited bool) error {
	st, param, vel, pcg, err := r.decode(shards, inherited)
	if err != nil {
		return fmt.Errorf("%s: restore checkpoint: %w", Name, err)
	}
	copy(r.m.param.all, param)
	copy(r.m.vel.all, vel)
	copy(r.order, st.Order)
	*r.pcg = *pcg
	r.epoch = st.Epoch
	return nil
}

// decode checks and decodes a checkpoint for r.
func (r *Run) decode(shards map[string][]byte, inherited bool) (st stateShard, param, vel []float64, pcg *rand.PCG, err error) {
	want := []string{ShardOptimizer, ShardState, ShardWeights}
	for _, name := range want {
		if _, ok := shards[name]; !ok {
			return st, nil, nil, nil, fmt.Errorf("%w: the %q shard is missing (the checkpoint has %s; it needs %s)",
				ErrBadCheckpoint, name, listNames(slices.Sorted(maps.Keys(shards))), listNames(want))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(shards)) {
		if !slices.Contains(want, name) {
			return st, nil, nil, nil, fmt.Errorf("%w: unexpected shard %q (a %s checkpoint has %s); it is not a %s checkpoint, or a newer trainer wrote it",
				ErrBadCheckpoint, name, Name, listNames(want), Name)
		}
	}
	if st, err = r.decodeState(shards[ShardState], inherited); err != nil {
		return st, nil, nil, nil, fmt.Errorf("%s shard: %w", ShardState, err)
	}
	pcg = new(rand.PCG)
	if err := pcg.UnmarshalBinary(st.RNG); err != nil {
		return st, nil, nil, nil, fmt.Errorf("%s shard: %w: rng: %w", ShardState, ErrBadCheckpoint, err)
	}
	if param, err = decodeLayers(shards[ShardWeights], kindWeights, r.cfg.HiddenUnits, st.Epoch, st.WeightsCRC); err != nil {
		return st, nil, nil, nil, fmt.Errorf("%s shard: %w", ShardWeights, err)
	}
	if vel, err = decodeLayers(shards[ShardOptimizer], kindMomentum, r.cfg.HiddenUnits, st.Epoch, st.OptimizerCRC); err != nil {
		return st, nil, nil, nil, fmt.Errorf("%s shard: %w", ShardOptimizer, err)
	}
	return st, param, vel, pcg, nil
}

// decodeState parses and checks the state shard.
func (r *Run) decodeState(data []byte, inherited bool) (stateShard, error) {
	var st stateShard
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%w: not the JSON object Save writes: %w", ErrBadCheckpoint, err)
	}
	// The format comes first: it defines the rest, the checksum included.
	if st.Format != formatVersion {
		return st, fmt.Errorf("%w: checkpoint format version %d; this trainer reads only version %d, so resume with the trainer release that wrote it or start the trial over",
			ErrCheckpointMismatch, st.Format, formatVersion)
	}
	sum, err := st.checksum()
	if err != nil {
		return st, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	if sum != st.CRC {
		return st, fmt.Errorf("%w: checksum mismatch (computed %08x, recorded %08x): corrupted or edited", ErrBadCheckpoint, sum, st.CRC)
	}
	if st.Workload != Name {
		return st, fmt.Errorf("%w: it is a checkpoint of workload %q, not %q", ErrCheckpointMismatch, st.Workload, Name)
	}
	want := fingerprintOf(r.cfg)
	if inherited {
		ck := st.Config
		want = fingerprint{LearningRate: ck.LearningRate, HiddenUnits: want.HiddenUnits, WeightDecay: ck.WeightDecay, BatchSize: ck.BatchSize, Momentum: ck.Momentum, Seed: ck.Seed}
	}
	if err := st.Config.diff(want); err != nil {
		return st, err
	}
	if st.DataCRC != dataChecksum() {
		return st, fmt.Errorf("%w: it was made with another copy of the embedded data set (CRC-32C %08x, this trainer's is %08x); resume it with the trainer release that wrote it",
			ErrCheckpointMismatch, st.DataCRC, dataChecksum())
	}
	if st.Epoch < 0 {
		return st, fmt.Errorf("%w: epoch %d is negative", ErrBadCheckpoint, st.Epoch)
	}
	if st.Epoch > r.cfg.Epochs {
		return st, fmt.Errorf("%w: it is at epoch %d, past this run's %s = %d; raise %s to at least %d",
			ErrCheckpointMismatch, st.Epoch, ParamEpochs, r.cfg.Epochs, ParamEpochs, st.Epoch)
	}
	if err := checkPermutation(st.Order, trainSize); err != nil {
		return st, fmt.Errorf("%w: order: %w", ErrBadCheckpoint, err)
	}
	return st, nil
}

// checkPermutation checks that order holds each of 0..n-1 once.
func checkPermutation(order []int, n int) error {
	if len(order) != n {
		return fmt.Errorf("%d entries, want %d (the training split's size)", len(order), n)
	}
	seen := make([]bool, n)
	for i, v := range order {
		if v < 0 || v >= n || seen[v] {
			return fmt.Errorf("entry %d = %d is out of range or repeated; want each of 0..%d once", i, v, n-1)
		}
		seen[v] = true
	}
	return nil
}

// encodeLayers writes a binary shard holding values.
func encodeLayers(kind uint32, hidden, epoch int, values []float64) []byte {
	b := make([]byte, 0, headerSize+8*len(values)+trailerSize)
	b = append(b, shardMagic...)
	for _, v := range []uint32{formatVersion, kind, inputs, uint32(hidden), classes, uint32(epoch)} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	for _, v := range values {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// trailer returns the checksum at the end of a binary shard.
func trailer(shard []byte) uint32 {
	return binary.LittleEndian.Uint32(shard[len(shard)-trailerSize:])
}

// decodeLayers checks a binary shard of the given kind against the network
// shape and the state shard's epoch and checksum, and returns its values.
func decodeLayers(data []byte, kind uint32, hidden, epoch int, wantCRC uint32) ([]float64, error) {
	if len(data) < headerSize+trailerSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header and trailer: truncated", ErrBadCheckpoint, len(data), headerSize+trailerSize)
	}
	if string(data[:4]) != shardMagic {
		return nil, fmt.Errorf("%w: it does not start with %q", ErrBadCheckpoint, shardMagic)
	}
	header := func(i int) uint32 { return binary.LittleEndian.Uint32(data[4*i:]) }
	if v := header(1); v != formatVersion {
		return nil, fmt.Errorf("%w: format version %d, this trainer reads only version %d", ErrCheckpointMismatch, v, formatVersion)
	}
	body := data[:len(data)-trailerSize]
	if sum, rec := crc32.Checksum(body, castagnoli), trailer(data); sum != rec {
		return nil, fmt.Errorf("%w: checksum mismatch (computed %08x, recorded %08x): truncated or corrupted", ErrBadCheckpoint, sum, rec)
	}
	if k := header(2); k != kind {
		return nil, fmt.Errorf("%w: it holds kind %d, want %d; the shards were swapped", ErrBadCheckpoint, k, kind)
	}
	if in, h, out := header(3), header(4), header(5); in != inputs || h != uint32(hidden) || out != classes {
		return nil, fmt.Errorf("%w: network %dx%dx%d, this run's is %dx%dx%d; the shards come from different checkpoints",
			ErrBadCheckpoint, in, h, out, inputs, hidden, classes)
	}
	if e := header(6); e != uint32(epoch) {
		return nil, fmt.Errorf("%w: it is from epoch %d, the %s shard from epoch %d; the shards come from different checkpoints",
			ErrBadCheckpoint, e, ShardState, epoch)
	}
	if rec := trailer(data); rec != wantCRC {
		return nil, fmt.Errorf("%w: its checksum %08x is not the %08x the %s shard records; the shards come from different checkpoints",
			ErrBadCheckpoint, rec, wantCRC, ShardState)
	}
	n := numParams(hidden)
	if got := len(body) - headerSize; got != 8*n {
		return nil, fmt.Errorf("%w: %d bytes of values, want %d (%d float64s)", ErrBadCheckpoint, got, 8*n, n)
	}
	values := make([]float64, n)
	for i := range values {
		values[i] = math.Float64frombits(binary.LittleEndian.Uint64(body[headerSize+8*i:]))
	}
	return values, nil
}

// listNames formats shard names for messages.
func listNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", n)
	}
	return b.String()
}
