package redisrules

import (
	"errors"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testLayout = &threeKeys{switchKey: "s", usersKey: "u", addrsKey: "a"}

// mapSwitch maps a whole switch value as the layout reads it: its length
// and its first switchPeek bytes.
func mapKeys(switchValue string, users, addrs []string, maxEntries int) (graylb.Rules, []string, error) {
	peek := switchValue
	if len(peek) > switchPeek {
		peek = peek[:switchPeek]
	}
	return testLayout.rules(int64(len(switchValue)), peek, users, addrs, maxEntries)
}

func TestSwitchValues(t *testing.T) {
	for _, c := range []struct {
		value string
		on    bool
		warn  bool
	}{
		{"true", true, false}, {"TRUE", true, false}, {"True", true, false},
		{"", false, true}, // missing: off, and said so
		{"false", false, false}, {"FALSE", false, false},
		{"1", false, true}, {"yes", false, true}, {" true", false, true}, {"true\n", false, true},
		{"truex", false, true}, {strings.Repeat("true", 1000), false, true},
	} {
		r, warnings, err := mapKeys(c.value, nil, nil, 10)
		require.NoError(t, err, "%q", c.value)
		require.NotNil(t, r.Enabled, "%q", c.value)
		assert.Equal(t, c.on, *r.Enabled, "%q", c.value)
		assert.Equal(t, c.warn, len(warnings) == 1, "%q: %v", c.value, warnings)
		for _, w := range warnings {
			assert.NotContains(t, w, "\n", "a warning stays one line")
			assert.Less(t, len(w), 200, "a huge switch value is not logged whole")
		}
	}
}

func TestListsMapOntoRules(t *testing.T) {
	r, _, err := mapKeys("true", []string{"alice", "bob"}, []string{"10.0.0.2", "10.0.0.3:8080", "[::1]:80", "gray-host"}, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"alice", "bob"}, r.GrayUsers)
	assert.Equal(t, []string{"10.0.0.2", "10.0.0.3:8080", "[::1]:80", "gray-host"}, r.GrayAddresses)
	assert.False(t, r.Closed)
	assert.Zero(t, r.CanaryPercent)

	r, _, err = mapKeys("", []string{}, []string{}, 10)
	require.NoError(t, err)
	assert.Nil(t, r.GrayUsers, "an empty list is no list")
	assert.Nil(t, r.GrayAddresses)
}

func TestHostileEntriesRefused(t *testing.T) {
	for _, c := range []struct {
		users, addrs []string
		key, want    string
	}{
		{[]string{"alice", ""}, nil, `"u"`, "grayUsers[1] is empty"},
		{nil, []string{""}, `"a"`, "grayAddresses[0]"},
		{nil, []string{"10.0.0.1/24"}, `"a"`, `10.0.0.1/24`},
		{nil, []string{"host\r\nX-Injected: 1"}, `"a"`, `grayAddresses[0]`},
		{nil, []string{"ok", "two words"}, `"a"`, `grayAddresses[1]`},
		{nil, []string{"h:0"}, `"a"`, "port"},
		{nil, []string{"h:99999"}, `"a"`, "port"},
		{nil, []string{":80"}, `"a"`, "empty host"},
		{nil, []string{"http://h"}, `"a"`, "grayAddresses[0]"},
	} {
		_, _, err := mapKeys("true", c.users, c.addrs, 10)
		require.Error(t, err, "%q %q", c.users, c.addrs)
		assert.True(t, errors.Is(err, graylb.ErrInvalidRules), err)
		assert.Contains(t, err.Error(), "list "+c.key, "the error names the key")
		assert.Contains(t, err.Error(), c.want)
		assert.NotContains(t, err.Error(), "\n", "the error stays one line")
	}
}

func TestListCaps(t *testing.T) {
	many := make([]string, 11)
	for i := range many {
		many[i] = "u"
	}
	_, _, err := mapKeys("true", many, nil, 10)
	require.ErrorIs(t, err, graylb.ErrInvalidRules)
	assert.Contains(t, err.Error(), `list "u" holds more than 10 entries`)
	_, _, err = mapKeys("true", many[:10], many[:10], 10)
	require.NoError(t, err, "the cap is per list, inclusive")

	big := strings.Repeat("x", graylb.MaxRulesSize/2)
	_, _, err = mapKeys("true", []string{big}, []string{big + "y"}, 10)
	require.ErrorIs(t, err, graylb.ErrInvalidRules)
	assert.Contains(t, err.Error(), "bytes, at most")
}

func TestHashSlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	assert.Equal(t, 12739, hashSlot("123456789"))
	assert.Equal(t, 12182, hashSlot("foo"))
	assert.Equal(t, hashSlot("user1000"), hashSlot("{user1000}.following"))
	assert.Equal(t, hashSlot("{}x"), hashSlot("{}x"), "an empty tag hashes the whole key")
	assert.NotEqual(t, hashSlot("{}a"), hashSlot("a"))
	assert.True(t, sameSlot([]string{DefaultSwitchKey, DefaultUsersKey, DefaultAddressesKey}))
	assert.False(t, sameSlot([]string{"gray:switch", "gray:users", "gray:addresses"}))
}

func TestKeyspaceFlags(t *testing.T) {
	need := (&threeKeys{}).eventClasses()
	assert.False(t, publishes("", need))
	assert.False(t, publishes("E$lgx", need), "keyevent only")
	assert.True(t, publishes("AKE", need))
	assert.True(t, publishes("K$", need), "some classes: the poll catches the rest")
	assert.False(t, covers("K$", need))
	assert.True(t, covers("K$lgx", need))
	assert.True(t, covers("KA", need))
	assert.True(t, covers(merge("", need), need))
	assert.True(t, covers(merge("Eh", need), need))
	assert.Equal(t, "AKE", merge("AKE", need))
	assert.Equal(t, `a\*b\?c\[d\]e\\f{g}`, globEscape(`a*b?c[d]e\f{g}`))
}

// FuzzThreeKeys: whatever the keys hold, the mapping does not panic, and
// what it accepts is valid rules whose switch is "true" alone.
func FuzzThreeKeys(f *testing.F) {
	f.Add("true", "alice", "10.0.0.1")
	f.Add("TRUE", "", "a/b")
	f.Add("no", "bob\nx", "[::1]:80")
	f.Add("", "\x00", "h:65536")
	f.Fuzz(func(t *testing.T, sw, user, addr string) {
		users := strings.Split(user, ",")
		addrs := strings.Split(addr, ",")
		r, warnings, err := mapKeys(sw, users, addrs, 4)
		if err != nil {
			if !errors.Is(err, graylb.ErrInvalidRules) {
				t.Fatalf("error not wrapping ErrInvalidRules: %v", err)
			}
			return
		}
		if vErr := r.Validate(); vErr != nil {
			t.Fatalf("accepted rules do not validate: %v", vErr)
		}
		if r.Enabled == nil || *r.Enabled != strings.EqualFold(sw, "true") {
			t.Fatalf("switch %q mapped to %v", sw, r.Enabled)
		}
		if len(users) > 4 || len(addrs) > 4 {
			t.Fatalf("more entries than the cap accepted")
		}
		for _, w := range warnings {
			if strings.ContainsAny(w, "\r\n") {
				t.Fatalf("warning with a line break: %q", w)
			}
		}
	})
}
