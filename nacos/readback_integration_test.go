package nacos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// consoleEdit sets an instance's metadata as an operator does in the
// console (seed 002 marks gray instances that way): the HTTP API's
// instance update, which the server keeps beside what the instance
// registered.
func consoleEdit(t *testing.T, addr, service string, port int, md map[string]string) {
	t.Helper()
	b, err := json.Marshal(md)
	require.NoError(t, err)
	q := url.Values{"serviceName": {service}, "ip": {"127.0.0.1"}, "port": {strconv.Itoa(port)},
		"ephemeral": {"true"}, "weight": {"1"}, "enabled": {"true"}, "metadata": {string(b)}}
	req, err := http.NewRequest(http.MethodPut, "http://"+addr+"/nacos/v1/ns/instance?"+q.Encode(), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the console's edit")
}

// served returns the metadata the server serves for the instance on port,
// nil when it lists none there.
func served(t *testing.T, addr, service string, port int) map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/nacos/v1/ns/instance/list?serviceName=" + url.QueryEscape(service))
	require.NoError(t, err)
	defer resp.Body.Close()
	var list struct {
		Hosts []struct {
			Port     int               `json:"port"`
			Metadata map[string]string `json:"metadata"`
		} `json:"hosts"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	for _, h := range list.Hosts {
		if h.Port == port {
			return h.Metadata
		}
	}
	return nil
}

// TestIntegration_ConsoleEditDoesNotOutliveARestart: an operator marks a
// prod instance gray in the console (gray-tag=true, as seed 002 does); the
// instance stops and its prod build starts again, registering
// gray-tag=false. Its registration reads itself back and writes what it
// registered: from 2 s after the restart no gray request reaches the prod
// build, and the server serves gray-tag=false.
func TestIntegration_ConsoleEditDoesNotOutliveARestart(t *testing.T) {
	addr := nacosAddr(t)
	svc := uniqueService(t)
	const port = 7311
	prod := false
	register := func() *Registration {
		reg, err := Register(context.Background(), Service{Name: svc, Host: "127.0.0.1", Port: port, Gray: &prod, GrayKey: "gray-tag"}, testOpts(t)...)
		require.NoError(t, err)
		return reg
	}
	reg := register()
	require.Eventually(t, func() bool { return served(t, addr, svc, port) != nil }, 10*time.Second, 50*time.Millisecond)
	consoleEdit(t, addr, svc, port, map[string]string{"gray-tag": "true"})
	require.Eventually(t, func() bool { return served(t, addr, svc, port)["gray-tag"] == "true" }, 10*time.Second, 50*time.Millisecond,
		"the console's edit is served")
	require.NoError(t, reg.Close()) // the process stops
	require.Eventually(t, func() bool { return served(t, addr, svc, port) == nil }, 10*time.Second, 50*time.Millisecond)

	reg = register() // its prod build starts again
	restarted := time.Now()
	t.Cleanup(func() { reg.Close() })
	require.Eventually(t, func() bool { return served(t, addr, svc, port) != nil }, 10*time.Second, 50*time.Millisecond)

	// From 2 s after the restart the server serves what the prod build
	// registered: a gray-tag reader (seed 002's gateway, graylb keyed
	// gray-tag) sends it no gray request.
	deadline := restarted.Add(2 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // pacing the reads until the 2 s mark, not a wait for an event
	}
	stale := 0
	for i := 0; i < 20; i++ {
		if served(t, addr, svc, port)["gray-tag"] != "false" {
			stale++
		}
		time.Sleep(25 * time.Millisecond) // pacing the reads over half a second
	}
	fragment(t, "interop-registry-console", fmt.Sprintf("| a console edit (gray-tag=true on a prod instance), then its restart | reads serving gray-tag=true from 2 s after the restart | %d of 20 |\n", stale))
	require.Zero(t, stale, "reads of the restarted prod instance serving %v instead of gray-tag=false", served(t, addr, svc, port))
}
