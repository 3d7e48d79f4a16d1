package bench

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSummarizeKafka(t *testing.T) {
	// round gives each case the same produce and consume time (ns), and
	// CPU time one tenth of it.
	round := func(ns ...float64) []KafkaRound {
		out := make([]KafkaRound, len(ns))
		for i, x := range ns {
			out[i] = KafkaRound{ProduceNs: x, ConsumeNs: x, ProduceCPUNs: x / 10, ConsumeCPUNs: x / 10, ProduceAllocs: float64(i), ConsumeAllocs: float64(2 * i)}
		}
		return out
	}
	for _, c := range []struct {
		name        string
		rounds      [][]KafkaRound
		ratio       []float64
		layout      float64
		plainProdNs float64 // median plain prod ProduceNs
	}{
		{"one round", [][]KafkaRound{round(100, 110, 200, 300, 250)}, []float64{1, 1.1, 1, 1.5, 1.25}, 1.2, 100},
		// The ratio is the median of each round's ratio, not the ratio of
		// the medians: a round where the machine stalled moves both sides.
		{"three rounds", [][]KafkaRound{round(100, 104, 100, 100, 100), round(1000, 1000, 100, 90, 100), round(110, 121, 100, 120, 100)},
			[]float64{1, 1.04, 1, 1.0, 1}, 1.0, 110},
		{"four rounds, the mean of the middle two", [][]KafkaRound{round(100, 100, 1, 1, 1), round(100, 110, 1, 1, 1), round(100, 120, 1, 1, 1), round(100, 130, 1, 1, 1)},
			[]float64{1, 1.15, 1, 1, 1}, 1, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := SummarizeKafka(c.rounds)
			for i := range c.ratio {
				if math.Abs(s.Ratio[i]-c.ratio[i]) > 1e-9 || math.Abs(s.CPURatio[i]-c.ratio[i]) > 1e-9 {
					t.Errorf("%s: ratio %v, CPU ratio %v, want %v", KafkaCases[i].Name, s.Ratio[i], s.CPURatio[i], c.ratio[i])
				}
			}
			if math.Abs(s.GrayLayout-c.layout) > 1e-9 || math.Abs(s.GrayLayoutCPU-c.layout) > 1e-9 {
				t.Errorf("gray layout ratio %v, CPU %v, want %v", s.GrayLayout, s.GrayLayoutCPU, c.layout)
			}
			if s.Cases[0].ProduceNs != c.plainProdNs || s.Cases[0].ProduceCPUNs != c.plainProdNs/10 || s.Rounds != len(c.rounds) {
				t.Errorf("plain prod produce = %v (CPU %v) over %d rounds, want %v over %d", s.Cases[0].ProduceNs, s.Cases[0].ProduceCPUNs, s.Rounds, c.plainProdNs, len(c.rounds))
			}
			if s.Cases[1].ProduceAllocs != 1 || s.Cases[3].ConsumeAllocs != 6 {
				t.Errorf("allocs = %+v", s.Cases)
			}
		})
	}
}

// TestKafkaTurnOrder: every case runs once per turn, and each kafkagray
// case's order against its base alternates from turn to turn.
func TestKafkaTurnOrder(t *testing.T) {
	pos := func(order []int, c int) int {
		for i, x := range order {
			if x == c {
				return i
			}
		}
		t.Fatalf("case %d missing from %v", c, order)
		return -1
	}
	for _, o := range kafkaTurnOrder {
		if len(o) != len(KafkaCases) {
			t.Fatalf("order %v: %d cases, want %d", o, len(o), len(KafkaCases))
		}
	}
	for i, c := range KafkaCases {
		if i == c.Base {
			continue
		}
		a, b := kafkaTurnOrder[0], kafkaTurnOrder[1]
		if (pos(a, i) < pos(a, c.Base)) == (pos(b, i) < pos(b, c.Base)) {
			t.Errorf("%s runs on the same side of its base in both turns", c.Name)
		}
	}
}

func TestKafkaBenchRefusesNoRecords(t *testing.T) {
	if _, err := NewKafkaBench(context.Background(), []string{"127.0.0.1:1"}, 0, 10); err == nil {
		t.Error("NewKafkaBench with 0 records: no error")
	}
	if _, err := NewKafkaBench(context.Background(), []string{"127.0.0.1:1"}, 10, 0); err == nil {
		t.Error("NewKafkaBench with batches of 0: no error")
	}
}

// TestKafkaBench runs two short rounds against the broker of
// GRAYLB_KAFKA_ADDR: every case produces and consumes back every record.
func TestKafkaBench(t *testing.T) {
	addr := os.Getenv("GRAYLB_KAFKA_ADDR")
	if addr == "" {
		t.Skip("GRAYLB_KAFKA_ADDR is not set (scripts/kafka.sh start, then GRAYLB_KAFKA_ADDR=127.0.0.1:19092)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := NewKafkaBench(ctx, strings.Split(addr, ","), 300, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	var rounds [][]KafkaRound
	for i := 0; i < 2; i++ {
		r, err := k.Round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rounds = append(rounds, r)
	}
	s := SummarizeKafka(rounds)
	for i, c := range s.Cases {
		if c.ProduceNs <= 0 || c.ConsumeNs <= 0 {
			t.Errorf("%s: %+v", KafkaCases[i].Name, c)
		}
	}
	t.Logf("%+v", s)
}
