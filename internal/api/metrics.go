package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// segmentBuckets bound the segment latency histogram, in seconds: from a
// fraction of a second to Cloud Run's longest task.
var segmentBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400}

// metrics are the server's Prometheus metrics: counters and histograms
// observed as things happen, and gauges read from the store at each scrape
// (studyCollector).
type metrics struct {
	registry *prometheus.Registry
	segments *prometheus.HistogramVec
	requests *prometheus.CounterVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		segments: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hpsearch_segment_duration_seconds",
			Help:    "Wall time of segment invocations this server ran, from start to result, by backend and outcome (attempt status).",
			Buckets: segmentBuckets,
		}, []string{"backend", "outcome"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hpsearch_http_requests_total",
			Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
	}
	m.registry.MustRegister(m.segments, m.requests, &studyCollector{s: s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// segment observes the latency of one segment invocation that ended.
func (m *metrics) segment(backend, status string, d time.Duration) {
	m.segments.WithLabelValues(backend, status).Observe(d.Seconds())
}

// request counts one answered request.
func (m *metrics) request(route string, status int) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
}

// serveMetrics writes the metrics in the format the scraper asks for.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(w, r)
	return nil
}

var (
	studiesDesc  = prometheus.NewDesc("hpsearch_studies", "Studies by state.", []string{"state"}, nil)
	trialsDesc   = prometheus.NewDesc("hpsearch_trials", "Trials by study and state.", []string{"study", "state"}, nil)
	inFlightDesc = prometheus.NewDesc("hpsearch_segments_in_flight", "Segments running now, by backend (local, lambda, cloudrun, or pool:NAME for a worker pool).", []string{"backend"}, nil)
	queueDesc    = prometheus.NewDesc("hpsearch_queue_depth", "Jobs waiting in the queue of each running study (ready or in backoff).", []string{"study"}, nil)
	costDesc     = prometheus.NewDesc("hpsearch_cost_usd", "Cost of every attempt of each study so far, in US dollars.", []string{"study"}, nil)
	wastedDesc   = prometheus.NewDesc("hpsearch_wasted_cost_usd", "Cost of the work each study lost (crashed, interrupted or retried attempts), in US dollars.", []string{"study"}, nil)
	scrapeErr    = prometheus.NewDesc("hpsearch_scrape_error", "1 when the store could not be read for this scrape.", nil, nil)
)

// studyCollector reads the studies' gauges from the store at each scrape.
type studyCollector struct {
	s *Server
}

// Describe implements prometheus.Collector.
func (c *studyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{studiesDesc, trialsDesc, inFlightDesc, queueDesc, costDesc, wastedDesc, scrapeErr} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *studyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	studies, err := c.s.cfg.Store.ListStudies(ctx)
	if err != nil {
		gauge(scrapeErr, 1)
		return
	}
	inFlight := map[string]int{string(spec.Local): 0, string(spec.Lambda): 0, string(spec.CloudRun): 0}
	byState := map[hptype.StudyState]int{}
	for _, st := range studies {
		byState[st.State]++
		trials, err := c.s.cfg.Store.ListTrials(ctx, st.ID)
		if err != nil {
			gauge(scrapeErr, 1)
			return
		}
		states := map[hptype.TrialState]int{}
		running := map[string]int{}
		var cost, wasted float64
		for _, t := range trials {
			states[t.State]++
			if t.State == hptype.TrialRunning {
				running[backendOf(t)]++
			}
			for _, a := range t.Attempts {
				cost += a.CostUSD
				wasted += a.WastedCostUSD
			}
		}
		for _, state := range trialStates {
			gauge(trialsDesc, float64(states[state]), st.Name, string(state))
		}
		gauge(costDesc, cost, st.Name)
		gauge(wastedDesc, wasted, st.Name)
		if rn := c.s.active(st.ID); rn != nil {
			for b, n := range running {
				if b == "" {
					b = string(rn.sp.Backend.Type)
				}
				inFlight[b] += n
			}
			if qs, err := rn.queue.Stats(ctx); err == nil {
				gauge(queueDesc, float64(qs.Ready+qs.Delayed), st.Name)
			}
		}
	}
	for _, state := range []hptype.StudyState{hptype.StudyRunning, hptype.StudyStopped, hptype.StudyCompleted, hptype.StudyFailed, hptype.StudyBudgetExhausted, hptype.StudyCancelled} {
		gauge(studiesDesc, float64(byState[state]), string(state))
	}
	for b, n := range inFlight {
		gauge(inFlightDesc, float64(n), b)
	}
	gauge(scrapeErr, 0)
}

// backendOf names where a running trial's segment runs: "pool:NAME" for a
// trial placed on a worker pool, "" for the study's backend.
func backendOf(t *hptype.Trial) string {
	if t.Placement != nil && t.Placement.Pool != "" {
		return "pool:" + t.Placement.Pool
	}
	return ""
}
