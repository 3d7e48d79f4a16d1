package nacos

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startedRegistrar is an SDK naming client that keeps the metadata of each
// registration it is sent.
type startedRegistrar struct {
	naming_client.INamingClient
	sent []map[string]string
}

func (f *startedRegistrar) RegisterInstance(p vo.RegisterInstanceParam) (bool, error) {
	f.sent = append(f.sent, p.Metadata)
	return true, nil
}

func (f *startedRegistrar) DeregisterInstance(vo.DeregisterInstanceParam) (bool, error) {
	return true, nil
}

// Register writes when the process started (MetadataStarted, Unix
// milliseconds) into the metadata it sends the server, the same for every
// registration of the process, so that a restarted process shows as a new
// value on its address; a value the Service gives is kept.
func TestRegister_WritesTheProcessStart(t *testing.T) {
	f := &startedRegistrar{}
	var values []string
	for i, md := range []map[string]string{nil, {"k": "v"}} {
		reg, err := Register(context.Background(), Service{Name: "svc" + strconv.Itoa(i), Host: "127.0.0.1", Port: 8080 + i, Metadata: md}, WithNamingClient(f))
		require.NoError(t, err)
		defer reg.Close()
		v := f.sent[i][MetadataStarted]
		assert.Equal(t, v, reg.Instance.Metadata[MetadataStarted], "the Registration's Instance says what was sent")
		ms, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "%s=%q", MetadataStarted, v)
		assert.False(t, time.UnixMilli(ms).After(time.Now()), "a start in the future: %s", time.UnixMilli(ms))
		assert.Less(t, time.Since(time.UnixMilli(ms)), time.Hour, "a start long before the test: %s", time.UnixMilli(ms))
		values = append(values, v)
	}
	assert.Equal(t, values[0], values[1], "two registrations of one process")
	reg, err := Register(context.Background(), Service{Name: "svc9", Host: "127.0.0.1", Port: 8089, Metadata: map[string]string{MetadataStarted: "42"}}, WithNamingClient(f))
	require.NoError(t, err)
	defer reg.Close()
	assert.Equal(t, "42", f.sent[2][MetadataStarted], "the Service's own value")
}
