package httpqueue

import (
	"context"
	"net/http"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
)

func (h *handler) enqueue(r *http.Request) (any, error) {
	var req enqueueRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	jobs := make([]queue.Job, len(req.Jobs))
	for i, j := range req.Jobs {
		jobs[i] = j.job()
	}
	res, err := h.q.Enqueue(r.Context(), jobs...)
	if err != nil {
		return nil, err
	}
	return enqueueResponse{Added: orEmpty(res.Added), Existing: orEmpty(res.Existing)}, nil
}

// lease leases with the wait capped at MaxWait. Jobs leased for a client
// that went away before the answer are released.
func (h *handler) lease(r *http.Request) (any, error) {
	var req leaseRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	ctx := r.Context()
	leases, err := h.q.Lease(ctx, queue.LeaseParams{
		Max:        req.Max,
		Visibility: time.Duration(req.Visibility),
		Wait:       min(time.Duration(req.Wait), h.opts.MaxWait),
		Owner:      req.Owner,
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		h.giveBack(ctx, req.Owner, leases)
		return nil, err
	}
	resp := leaseResponse{Leases: make([]wireLease, len(leases))}
	for i, l := range leases {
		resp.Leases[i] = wireLease{Job: toWireJob(l.Job), Token: l.Token, Attempt: l.Attempt, Expires: l.Expires}
	}
	return resp, nil
}

// giveBack releases leases, so that their jobs are visible again at once
// and the attempt does not count.
func (h *handler) giveBack(ctx context.Context, owner string, leases []queue.Lease) {
	if len(leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	for _, l := range leases {
		if err := h.q.Release(ctx, l.Token); err != nil {
			h.opts.Logger.Warn("httpqueue: release the lease of a client that went away", "owner", owner, "job", l.Job.ID, "error", err)
		}
	}
	h.opts.Logger.Info("httpqueue: released the leases of a client that went away before the answer", "owner", owner, "jobs", len(leases))
}

func (h *handler) extend(r *http.Request) (any, error) {
	var req extendRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	expires, err := h.q.Extend(r.Context(), req.Token, time.Duration(req.Visibility))
	if err != nil {
		return nil, staleToken(err, req.Token)
	}
	return extendResponse{Expires: expires}, nil
}

func (h *handler) ack(r *http.Request) (any, error) {
	var req ackRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return nil, h.q.Ack(r.Context(), req.Tokens...)
}

func (h *handler) nack(r *http.Request) (any, error) {
	var req nackRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return nil, staleToken(h.q.Nack(r.Context(), req.Token, req.Cause), req.Token)
}

func (h *handler) release(r *http.Request) (any, error) {
	var req releaseRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return nil, staleToken(h.q.Release(r.Context(), req.Token), req.Token)
}

func (h *handler) get(r *http.Request) (any, error) {
	info, err := h.q.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return toWireInfo(info), nil
}

func (h *handler) stats(r *http.Request) (any, error) {
	st, err := h.q.Stats(r.Context())
	if err != nil {
		return nil, err
	}
	return wireStats(st), nil
}

func (h *handler) dead(r *http.Request) (any, error) {
	dead, err := h.q.Dead(r.Context())
	if err != nil {
		return nil, err
	}
	resp := deadResponse{Jobs: make([]wireInfo, len(dead))}
	for i, info := range dead {
		resp.Jobs[i] = toWireInfo(info)
	}
	return resp, nil
}

// unmatched answers a request that no route matches: 405 when the path has
// a route for another method, 404 otherwise.
func (h *handler) unmatched(w http.ResponseWriter, r *http.Request) {
	probe := r.Clone(r.Context())
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); m != r.Method && pattern != "/" {
			w.Header().Set("Allow", m)
			writeError(w, errorf(http.StatusMethodNotAllowed, codeMethod, "%s %s: the route takes %s", r.Method, r.URL.Path, m))
			return
		}
	}
	writeError(w, errorf(http.StatusNotFound, codeNoRoute, "no route %s %s: the queue's routes are %s/enqueue, /lease, /extend, /ack, /nack, /release, /jobs/{id}, /stats and /dead",
		r.Method, r.URL.Path, h.opts.Prefix))
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
