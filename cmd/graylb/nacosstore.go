package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"time"
)

// nacosStore keeps the rule document in a Nacos config.
type nacosStore struct {
	api           *nacosAPI
	dataID, group string
	// settleTime is the store's settle (see store.settle): defaultSettle
	// unless a test shortens it.
	settleTime time.Duration
}

// defaultSettle is how long a write to Nacos waits before its read-back.
// r-nacos ignores casMd5, so two writers whose checks both passed both
// write; the one whose write landed first can tell only by reading after
// the other's landed too. The other's write follows its check by one
// request (a few milliseconds on a healthy server); r-nacos shows a
// published config to reads at once (measured: see docs/operations.md).
// Half a second covers a slow server many times over.
const defaultSettle = 500 * time.Millisecond

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func (s *nacosStore) describe() string {
	return describeConfig(s.api, s.group, s.dataID)
}

func describeConfig(api *nacosAPI, group, dataID string) string {
	d := "nacos config " + group + "/" + dataID
	if api.namespace != "" {
		d += " in namespace " + api.namespace
	}
	return d + " @ " + api.describe()
}

func (s *nacosStore) settle() time.Duration { return s.settleTime }

func (s *nacosStore) get(ctx context.Context) (document, error) {
	return getConfigDoc(ctx, s.api, s.group, s.dataID)
}

func getConfigDoc(ctx context.Context, api *nacosAPI, group, dataID string) (document, error) {
	data, ok, err := api.getConfig(ctx, dataID, group)
	if err != nil {
		return document{}, err
	}
	d := document{data: data, exists: ok}
	if ok {
		d.rev = md5hex(data)
	}
	return d, nil
}

// put reads the config again and compares its md5 with prev's before
// writing with casMd5: a server that enforces casMd5 (official Nacos)
// closes the window between that read and the write; one that ignores it
// (r-nacos) leaves that window open, and the caller verifies the write by
// reading it back after settle (see modifyOver).
func (s *nacosStore) put(ctx context.Context, prev document, data []byte) error {
	return putConfigDoc(ctx, s.api, s.group, s.dataID, prev, data)
}

func putConfigDoc(ctx context.Context, api *nacosAPI, group, dataID string, prev document, data []byte) error {
	now, err := getConfigDoc(ctx, api, group, dataID)
	if err != nil {
		return err
	}
	if now.exists != prev.exists || now.rev != prev.rev {
		return errConflict
	}
	return api.publishConfig(ctx, dataID, group, data, prev.rev)
}

func (s *nacosStore) aux(name string) auxStore {
	return &nacosAux{api: s.api, group: s.group, dataID: s.dataID + "." + name}
}

// nacosAux is a config beside the rules' (data id: the rules' and a
// suffix), in the same group and namespace.
type nacosAux struct {
	api           *nacosAPI
	group, dataID string
}

func (a *nacosAux) describe() string { return describeConfig(a.api, a.group, a.dataID) }

func (a *nacosAux) get(ctx context.Context) (document, error) {
	return getConfigDoc(ctx, a.api, a.group, a.dataID)
}

// put ignores ttl: a Nacos config does not expire (the lease says when it
// does in its content).
func (a *nacosAux) put(ctx context.Context, prev document, data []byte, _ time.Duration) error {
	return putConfigDoc(ctx, a.api, a.group, a.dataID, prev, data)
}

func (a *nacosAux) remove(ctx context.Context, prev document) error {
	now, err := a.get(ctx)
	if err != nil {
		return err
	}
	if !now.exists {
		return nil
	}
	if now.rev != prev.rev {
		return errConflict
	}
	return a.api.deleteConfig(ctx, a.dataID, a.group)
}

func (s *nacosStore) close() error { return nil }
