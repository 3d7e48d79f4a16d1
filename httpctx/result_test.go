package httpctx

import (
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A try's status is read by adapter.HTTPResult; WithFailureStatus decides
// only whether it counts against the instance.
func TestTransport_ResultOf(t *testing.T) {
	lb, err := graylb.New(graylb.NewRegistry())
	require.NoError(t, err)
	defer lb.Close()
	only503 := func(s int) bool { return s == 503 }
	all5xx := func(s int) bool { return s >= 500 && s <= 599 }
	for _, c := range []struct {
		status                   int
		byDefault, only503, all5 adapter.Result
	}{
		{200, adapter.OK, adapter.OK, adapter.OK},
		{404, adapter.OK, adapter.OK, adapter.OK},
		{429, adapter.Overloaded, adapter.Overloaded, adapter.Overloaded},
		{499, adapter.Cancelled, adapter.Cancelled, adapter.Cancelled},
		{500, adapter.Failed, adapter.OK, adapter.Failed},
		{501, adapter.OK, adapter.OK, adapter.Failed},
		{502, adapter.Failed, adapter.OK, adapter.Failed},
		{503, adapter.Failed, adapter.Failed, adapter.Failed},
		{504, adapter.DeadlineAnswered, adapter.DeadlineAnswered, adapter.Failed},
		{0, adapter.OK, adapter.OK, adapter.OK},
		{999, adapter.OK, adapter.OK, adapter.OK},
	} {
		assert.Equal(t, c.byDefault, NewTransport(lb).resultOf(c.status), "%d by default", c.status)
		assert.Equal(t, c.byDefault, NewTransport(lb, WithFailureStatus(nil)).resultOf(c.status), "%d with WithFailureStatus(nil)", c.status)
		assert.Equal(t, c.only503, NewTransport(lb, WithFailureStatus(only503)).resultOf(c.status), "%d failing only 503", c.status)
		assert.Equal(t, c.all5, NewTransport(lb, WithFailureStatus(all5xx)).resultOf(c.status), "%d failing every 5xx", c.status)
	}
}
