package bench

import (
	"testing"
)

// Learning 100 000 services takes at most LearningTarget; the time per
// service at 100 000 stays within 2× of that at 2 500 (it grew with the
// number of services known while every new one copied the whole table).
func TestLearning_Linear(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("times the learning of 100 000 services")
	}
	small, err := Learning(LearningSizes[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	large, err := Learning(100_000, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d services: %v (%v a service); %d: %v (%v a service)", small.Services, small.Took, small.PerService(), large.Services, large.Took, large.PerService())
	if large.Took > LearningTarget {
		t.Errorf("learning %d services took %v, over %v", large.Services, large.Took, LearningTarget)
	}
	if r := float64(large.PerService()) / float64(small.PerService()); r > 2 {
		t.Errorf("a service cost %.2f× at %d what it cost at %d", r, large.Services, small.Services)
	}
}
