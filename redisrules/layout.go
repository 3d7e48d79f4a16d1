package redisrules

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"strings"

	"github.com/graylb/graylb"
	"github.com/redis/go-redis/v9"
)

// A layout is the way rules are kept in Redis: which keys, the commands
// that read them, and how what they hold maps onto graylb.Rules.
type layout interface {
	// keys returns the key names, for validation, notifications and logs.
	keys() []string
	// describe names the layout and its keys, for RuleSource.Describe.
	describe() string
	// eventClasses returns the notify-keyspace-events classes whose events
	// change the keys.
	eventClasses() string
	// queue queues the read commands on p; after p is executed, result
	// decodes their replies. result returns an error wrapping ErrRedis when
	// the read itself failed.
	queue(p redis.Pipeliner, maxEntries int) (result func() (content, error))
}

// content is what the keys held at one read.
type content struct {
	// sum identifies the data read: equal sums, equal data.
	sum [sha256.Size]byte
	// rules are the rules the data makes, when err is nil.
	rules graylb.Rules
	// err, when the data does not make valid rules, wraps
	// graylb.ErrInvalidRules and names the key.
	err error
	// missing: the document layout found no document.
	missing bool
	// warnings describe data accepted in a way its writer may not expect.
	warnings []string
}

// summer builds content.sum from length-prefixed fields, so that no two
// different sequences of fields sum alike by concatenation.
type summer struct{ h hash.Hash }

func newSummer(layoutName string) summer {
	s := summer{h: sha256.New()}
	s.add(layoutName)
	return s
}

func (s summer) add(field string) {
	var n [binary.MaxVarintLen64]byte
	s.h.Write(n[:binary.PutUvarint(n[:], uint64(len(field)))])
	s.h.Write([]byte(field))
}

func (s summer) sum() (out [sha256.Size]byte) {
	copy(out[:], s.h.Sum(nil))
	return out
}

// replyErr sorts a command's error: a key of the wrong type is content
// (the data is wrong, not the connection); anything else is a failed read.
func replyErr(key string, err error) (contentErr, readErr error) {
	if err == nil {
		return nil, nil
	}
	if strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return fmt.Errorf("%w: redisrules: key %q holds the wrong type of value", graylb.ErrInvalidRules, key), nil
	}
	return nil, fmt.Errorf("%w: %w", ErrRedis, err)
}
