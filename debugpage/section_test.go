package debugpage_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/debugpage"
)

// A section's value is read at each request and shown as JSON, in the
// page's State and, escaped, in the HTML, in the order the sections were
// given; a value that does not encode shows its error; a nil one is
// ignored.
func TestWithSection(t *testing.T) {
	lb, _ := newTestLB(t, []graylb.Instance{inst("svc", 9001)})
	var calls atomic.Int64
	h := debugpage.Handler(lb,
		debugpage.WithSection("kafka <consumer>", func() any {
			calls.Add(1)
			return map[string]any{"group": "<script>alert(1)</script>", "records": calls.Load()}
		}),
		debugpage.WithSection("nil", nil),
		debugpage.WithSection("broken", func() any { return func() {} }),
	)

	_, body := debugGet(t, h, "/?format=json")
	var st debugpage.State
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Len(t, st.Sections, 2)
	require.Equal(t, "kafka <consumer>", st.Sections[0].Name)
	var v struct {
		Group   string `json:"group"`
		Records int    `json:"records"`
	}
	require.NoError(t, json.Unmarshal(st.Sections[0].Value, &v))
	require.Equal(t, "<script>alert(1)</script>", v.Group)
	require.Equal(t, 1, v.Records)
	require.Equal(t, "broken", st.Sections[1].Name)
	require.Contains(t, st.Sections[1].Error, "unsupported type")
	require.Empty(t, st.Sections[1].Value)

	_, page := debugGet(t, h, "/")
	require.Equal(t, int64(2), calls.Load(), "read again at the second request")
	require.NotContains(t, page, "<script>")
	require.Contains(t, page, `<h2>kafka &lt;consumer&gt;</h2>`)
	require.Contains(t, page, `&#34;records&#34;: 2`)
	require.Contains(t, page, `&lt;script&gt;alert(1)&lt;/script&gt;`)
	require.Contains(t, page, `class="bad section-error">json: unsupported type: func()`)
	require.Less(t, strings.Index(page, "kafka &lt;consumer&gt;"), strings.Index(page, `data-section="broken"`))
}

// Without a section the JSON has none and the page shows none.
func TestWithoutSections(t *testing.T) {
	lb, _ := newTestLB(t, nil)
	h := debugpage.Handler(lb)
	_, body := debugGet(t, h, "/?format=json")
	require.NotContains(t, body, `"sections"`)
	_, page := debugGet(t, h, "/")
	require.NotContains(t, page, `class="extra"`)
}
