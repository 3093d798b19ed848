package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// SpotNotice polls the EC2 instance metadata service at base (e.g.
// http://169.254.169.254) for a spot interruption notice, every interval,
// with IMDSv2 session tokens, and calls notice once when there is one: AWS
// gives two minutes' notice, which is the worker's time to checkpoint. It
// returns when ctx ends or after the notice. The service answers 404 while
// no interruption is scheduled.
func SpotNotice(ctx context.Context, client *http.Client, base string, interval time.Duration, log *slog.Logger, notice func(action string)) {
	base = strings.TrimRight(base, "/")
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		action, err := spotAction(ctx, client, base)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Debug("could not read the spot interruption notice", "error", err)
		case action != "":
			notice(action)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// spotAction returns the pending spot instance action, or "" when none.
func spotAction(ctx context.Context, client *http.Client, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/latest/api/token", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "300")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("get an IMDSv2 token: %w", err)
	}
	token, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("get an IMDSv2 token: status %s: %w", resp.Status, err)
	}
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/latest/meta-data/spot/instance-action", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-aws-ec2-metadata-token", string(token))
	resp, err = client.Do(req)
	if err != nil {
		return "", fmt.Errorf("read spot/instance-action: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", nil
	case err != nil || resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("read spot/instance-action: status %s: %w", resp.Status, err)
	}
	return string(body), nil
}
