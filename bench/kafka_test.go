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
	round := func(plainProd, graylbProd, plainGray, graylbGray float64) []KafkaRound {
		return []KafkaRound{
			{ProduceNs: plainProd, ConsumeNs: plainProd, ProduceAllocs: 1},
			{ProduceNs: graylbProd, ConsumeNs: graylbProd, ProduceAllocs: 2},
			{ProduceNs: plainGray, ConsumeNs: plainGray, ConsumeAllocs: 3},
			{ProduceNs: graylbGray, ConsumeNs: graylbGray, ConsumeAllocs: 4},
		}
	}
	for _, c := range []struct {
		name   string
		rounds [][]KafkaRound
		ratio  [2]float64
		prodNs float64 // median plain prod ProduceNs
	}{
		{"one round", [][]KafkaRound{round(100, 110, 200, 300)}, [2]float64{1.1, 1.5}, 100},
		// The ratio is the median of each round's ratio, not the ratio of
		// the medians: a round where the machine stalled moves both sides.
		{"three rounds", [][]KafkaRound{round(100, 104, 100, 100), round(1000, 1000, 100, 90), round(110, 121, 100, 120)}, [2]float64{1.04, 1.0}, 110},
		{"four rounds, the mean of the middle two", [][]KafkaRound{round(100, 100, 1, 1), round(100, 110, 1, 1), round(100, 120, 1, 1), round(100, 130, 1, 1)}, [2]float64{1.15, 1}, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := SummarizeKafka(c.rounds)
			for k := range c.ratio {
				if math.Abs(s.Ratio[k]-c.ratio[k]) > 1e-9 {
					t.Errorf("ratio[%d] = %v, want %v", k, s.Ratio[k], c.ratio[k])
				}
			}
			if s.Cases[0].ProduceNs != c.prodNs || s.Rounds != len(c.rounds) {
				t.Errorf("plain prod produce = %v over %d rounds, want %v over %d", s.Cases[0].ProduceNs, s.Rounds, c.prodNs, len(c.rounds))
			}
			if s.Cases[1].ProduceAllocs != 2 || s.Cases[3].ConsumeAllocs != 4 {
				t.Errorf("allocs = %+v", s.Cases)
			}
		})
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
