package bench

import (
	"fmt"
	"strconv"
	"time"

	"github.com/graylb/graylb"
)

// LearningSizes are the service counts of the learning table.
var LearningSizes = []int{2_500, 5_000, 10_000, 20_000, 50_000, 100_000}

// LearningTarget is the most learning 100 000 services may take.
const LearningTarget = 5 * time.Second

// LearningResult is one row of the learning table.
type LearningResult struct {
	Services int
	Took     time.Duration // the first picks of every service, each once gray and once prod
}

// PerService is the time a service took to learn.
func (r LearningResult) PerService() time.Duration { return r.Took / time.Duration(r.Services) }

// Learning registers services services of 4 instances each (one gray) in
// a Registry, then times one LoadBalancer's first picks of all of them,
// each picked once gray and once prod: a LoadBalancer learns a service at
// its first pick (it asks its Supplier for the list, watches it, builds the
// service's routing and adds it to its table of services). The least of
// runs runs is kept.
func Learning(services, runs int) (LearningResult, error) {
	reg := graylb.NewRegistry()
	names := make([]string, services)
	for s := range names {
		names[s] = "svc-" + strconv.Itoa(s)
		for i := range 4 {
			md := map[string]string{"gray": strconv.FormatBool(i == 3)}
			if err := reg.Register(graylb.NewInstance(names[s], fmt.Sprintf("10.%d.%d.%d", s>>16&255, s>>8&255, s&255), 8000+i, md)); err != nil {
				return LearningResult{}, err
			}
		}
	}
	reqs := Requests()
	best := LearningResult{Services: services, Took: time.Duration(1<<63 - 1)}
	for range max(runs, 1) {
		lb, err := graylb.New(reg)
		if err != nil {
			return LearningResult{}, err
		}
		start := time.Now()
		for _, name := range names {
			for _, ctx := range reqs {
				if _, err := lb.Pick(ctx, name); err != nil {
					lb.Close()
					return LearningResult{}, fmt.Errorf("%s: %w", name, err)
				}
			}
		}
		took := time.Since(start)
		lb.Close()
		best.Took = min(best.Took, took)
	}
	return best, nil
}
