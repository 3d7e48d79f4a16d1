package nacos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/require"
)

// TestIntegration_KeysConfiguredOnce: a service's LoadBalancer reads the
// gray flag under gray-tag (graylb.WithGrayKey), as the Java estate does;
// its gray build registers itself as the program did, naming no
// key. The registration writes gray-tag, the key the process reads: none
// of 400 prod requests reaches the gray build (130 did when it wrote gray).
func TestIntegration_KeysConfiguredOnce(t *testing.T) {
	svc := uniqueService(t)
	sup, err := NewSupplier(testOpts(t)...)
	require.NoError(t, err)
	t.Cleanup(func() { sup.Close() })
	lb, err := graylb.New(sup, graylb.WithGrayKey("gray-tag"), graylb.WithGrayHeader("gray-tag"))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })

	prod, gray := false, true
	for port, kind := range map[int]*bool{7321: &prod, 7322: &gray} {
		reg, err := Register(context.Background(), Service{Name: svc, Host: "127.0.0.1", Port: port, Gray: kind}, testOpts(t)...)
		require.NoError(t, err)
		t.Cleanup(func() { reg.Close() })
	}
	grayReq := graylb.WithValue(context.Background(), "gray-tag", "true")
	require.Eventually(t, func() bool { return len(ports(t, lb, grayReq, svc, 4)) > 0 && listed(t, sup, svc) == 2 },
		10*time.Second, 50*time.Millisecond, "both builds listed")
	onGray := 0
	for i := 0; i < 400; i++ {
		in, err := lb.Pick(noneCtx, svc)
		require.NoError(t, err)
		if in.Port == 7322 {
			onGray++
		}
	}
	fragment(t, "interop-registry-keys", fmt.Sprintf("| keys once: a LoadBalancer keyed gray-tag, its gray build registered naming no key | prod requests on the gray build | %d of 400 |\n", onGray))
	require.Zero(t, onGray, "prod requests of 400 served by the gray build")
	in, err := lb.Pick(grayReq, svc)
	require.NoError(t, err)
	require.Equal(t, 7322, in.Port, "a gray request reaches the gray build")
}

func listed(t *testing.T, sup *Supplier, svc string) int {
	t.Helper()
	list, err := sup.Instances(context.Background(), svc)
	if err != nil {
		return 0
	}
	return len(list)
}
