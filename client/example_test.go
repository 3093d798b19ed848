package client_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/hpsearch/hpsearch/client"
)

// Run a study on the server and follow it to the end.
func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", client.WithToken(os.Getenv("HPSEARCH_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	space, err := os.ReadFile("examples/quickstart/space.yaml")
	if err != nil {
		log.Fatal(err)
	}
	st, err := c.CreateStudy(ctx, space, &client.CreateOptions{Filename: "examples/quickstart/space.yaml"})
	if err != nil {
		log.Fatal(err) // a *client.Error; for a bad document, Problems has each line:column
	}
	err = c.Follow(ctx, st.Name, st.LastEventID, func(e *client.Event) error {
		if e.Kind == client.EventTrialCompleted {
			fmt.Printf("trial %d: %v\n", e.Trial.Number, *e.Trial.Value)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	best, err := c.Best(ctx, st.Name)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("best:", best.Number, *best.Value, best.Params)
}

// An external loop that evaluates the trials itself: ask, evaluate, tell.
func ExampleClient_Ask() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", client.WithToken(os.Getenv("HPSEARCH_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	space := []byte(`name: quadratic
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -5, max: 5}
sampler: {type: tpe, seed: 1}
max_trials: 50
`)
	if _, err := c.CreateStudy(ctx, space, &client.CreateOptions{Mode: client.ModeAskTell}); err != nil {
		log.Fatal(err)
	}
	for range 50 {
		t, err := c.Ask(ctx, "quadratic")
		if err != nil {
			log.Fatal(err)
		}
		x, err := t.Params.Float("x")
		if err != nil {
			log.Fatal(err)
		}
		loss := (x - 1) * (x - 1)
		report := client.Report{State: client.TrialCompleted, Metrics: []client.Metric{{Step: 1, Name: "loss", Value: loss}}}
		if _, err := c.Tell(ctx, "quadratic", t.Number, report); err != nil {
			log.Fatal(err)
		}
	}
	best, err := c.Best(ctx, "quadratic")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("best x:", best.Params["x"], "loss:", *best.Value)
}
