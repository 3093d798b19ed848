package coordinator

import (
	"context"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// PoolProgress is the use of a study's worker pool during this run of the
// study: its workers' time, busy or idle (pool machines are billed by the
// hour either way), and what the idle time cost. The busy time's cost is in
// the trials' attempts.
type PoolProgress struct {
	Name string `json:"name"`
	// Workers counts the workers that ran, busy or idle, during this run
	// of the study.
	Workers     int     `json:"workers"`
	BusySeconds float64 `json:"busy_seconds"`
	IdleSeconds float64 `json:"idle_seconds"`
	// Utilisation is busy / (busy + idle).
	Utilisation float64 `json:"utilisation"`
	IdleCostUSD float64 `json:"idle_cost_usd"`
	// CostUSD is what the pool's trials' attempts cost.
	CostUSD float64 `json:"cost_usd"`
	// Trials counts the trials placed on the pool.
	Trials int `json:"trials"`
}

// PoolSummary sums the ledgers of a pool's workers, less what they held at
// since (their ledgers when this run of the study began: the pool's time
// before it, and other studies' before it, is not this run's), and the
// cost of the trials placed on it. Idle time is priced at the space file's
// pool.price_per_hour, like the busy time.
func PoolSummary(pool *spec.Pool, trials []*hptype.Trial, workers, since []hptype.WorkerUsage) *PoolProgress {
	p := &PoolProgress{Name: pool.Name}
	before := map[string]hptype.WorkerUsage{}
	for _, w := range since {
		before[w.ID] = w
	}
	for _, t := range trials {
		if onPool(t) {
			p.Trials++
			p.CostUSD += t.CostUSD()
		}
	}
	for _, w := range workers {
		b := before[w.ID]
		busy, idle := max(0, w.BusySeconds-b.BusySeconds), max(0, w.IdleSeconds-b.IdleSeconds)
		if busy+idle == 0 {
			continue
		}
		p.Workers++
		p.BusySeconds += busy
		p.IdleSeconds += idle
		p.IdleCostUSD += idle * pool.PricePerHour / 3600
	}
	if total := p.BusySeconds + p.IdleSeconds; total > 0 {
		p.Utilisation = p.BusySeconds / total
	}
	return p
}

// onPool reports whether the trial runs on the worker pool.
func onPool(t *hptype.Trial) bool {
	return t.Placement != nil && t.Placement.Pool != ""
}

// segmentCost prices an attempt: by the hour on the pool, by the
// backend's tariff otherwise.
func (c *coordinator) segmentCost(t *hptype.Trial, billed time.Duration) float64 {
	if onPool(t) {
		return billed.Seconds() * c.cfg.Spec.Pool.PricePerHour / 3600
	}
	return c.cfg.Spec.Backend.SegmentCost(billed)
}

// ratePerSecond is what a second of the trial's compute costs.
func (c *coordinator) ratePerSecond(t *hptype.Trial) float64 {
	if onPool(t) {
		return c.cfg.Spec.Pool.PricePerHour / 3600
	}
	return c.cfg.Spec.Backend.RatePerSecond()
}

// readWorkers refreshes the pool workers' ledgers; the first read is the
// baseline this run's figures start from. Failing to read them costs the
// idle figures, not the study, so it is logged.
func (c *coordinator) readWorkers(ctx context.Context) {
	if c.cfg.PoolUsage == nil {
		return
	}
	ws, err := c.cfg.PoolUsage(ctx)
	if err != nil {
		c.cfg.Logger.Warn("could not read the pool workers' ledgers", "error", err)
		return
	}
	c.workers = ws
	if c.since == nil {
		c.since = ws
	}
}
