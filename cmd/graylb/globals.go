package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/nacos"
	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
)

// globals are the flags every command takes (kubectl style: before or
// after the command's own arguments).
type globals struct {
	nacos, namespace, group, dataID string
	username, password              string
	redis, redisKey, redisKeys      string
	output                          string
	timeout                         time.Duration
	grayKey, versionKey             string
}

func (g *globals) register(fs *flag.FlagSet, e env) {
	def := func(name, fallback string) string {
		if v := e.getenv(name); v != "" {
			return v
		}
		return fallback
	}
	fs.StringVar(&g.nacos, "nacos", def(envNacos, "127.0.0.1:8848"), "Nacos servers, host:port or http(s) URLs, comma-separated [$"+envNacos+"]; credentials from $"+envUsername+" and $"+envPassword)
	fs.StringVar(&g.namespace, "namespace", def(envNamespace, ""), "Nacos namespace id (empty: public) [$"+envNamespace+"]")
	fs.StringVar(&g.group, "group", def(envGroup, "DEFAULT_GROUP"), "Nacos group of the rule document and the services [$"+envGroup+"]")
	fs.StringVar(&g.dataID, "data-id", def(envDataID, nacos.DefaultRulesDataID), "Nacos data id of the rule document [$"+envDataID+"]")
	fs.StringVar(&g.redis, "redis", def(envRedis, ""), "keep the rules in Redis instead of Nacos: host:port or a redis:// URL [$"+envRedis+"]")
	fs.StringVar(&g.redisKey, "redis-key", def(envRedisKey, ""), "Redis document layout: the key of the JSON rule document (default "+redisrules.DefaultDocumentKey+" unless --redis-keys) [$"+envRedisKey+"]")
	fs.StringVar(&g.redisKeys, "redis-keys", def(envRedisKeys, ""), "Redis three-key layout: SWITCH,USERS,ADDRESSES key names, or \"default\" for "+redisrules.DefaultSwitchKey+",... [$"+envRedisKeys+"]")
	fs.StringVar(&g.output, "output", def(envOutput, "text"), "output format: text or json [$"+envOutput+"]")
	fs.StringVar(&g.output, "o", def(envOutput, "text"), "shorthand for --output")
	fs.DurationVar(&g.timeout, "timeout", 10*time.Second, "bound of each call to Nacos or Redis")
	fs.StringVar(&g.grayKey, "gray-key", graylb.DefaultGrayHeader, "instance metadata key that marks a gray instance (the clients' WithGrayKey)")
	fs.StringVar(&g.versionKey, "version-key", graylb.DefaultVersionHeader, "instance metadata key of the version")
	g.username, g.password = e.getenv(envUsername), e.getenv(envPassword)
}

func (g *globals) check() error {
	if g.output != "text" && g.output != "json" {
		return fmt.Errorf("--output %q: text or json", g.output)
	}
	if g.timeout <= 0 {
		return fmt.Errorf("--timeout %v: must be positive", g.timeout)
	}
	if g.redisKey != "" && g.redisKeys != "" {
		return errors.New("--redis-key and --redis-keys choose different layouts: give one")
	}
	if g.redis == "" && (g.redisKey != "" || g.redisKeys != "") {
		return errors.New("--redis-key/--redis-keys need --redis")
	}
	return nil
}

// openStore returns where the rules live: Redis when --redis is given,
// else Nacos config.
func (g *globals) openStore(e env) (store, error) {
	if g.redis != "" {
		return g.openRedis()
	}
	api, err := g.nacosAPI(e)
	if err != nil {
		return nil, err
	}
	return &nacosStore{api: api, dataID: g.dataID, group: g.group, settleTime: defaultSettle}, nil
}

func (g *globals) nacosAPI(e env) (*nacosAPI, error) {
	c := e.http
	if c == nil {
		c = &http.Client{}
	}
	c2 := *c
	c2.Timeout = g.timeout
	return newNacosAPI(g.nacos, g.namespace, g.username, g.password, &c2)
}

func (g *globals) openRedis() (*redisStore, error) {
	var opt *redis.Options
	if strings.Contains(g.redis, "://") {
		var err error
		if opt, err = redis.ParseURL(g.redis); err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				// url.Parse's reasons quote the part of the URL at fault,
				// which may be in the password.
				return nil, fmt.Errorf("--redis %q: not a URL (a character or %%-escape out of place, not shown: it may be in the password)", redactURL(g.redis))
			}
			return nil, fmt.Errorf("--redis: %v", redactURL(err.Error()))
		}
	} else {
		opt = &redis.Options{Addr: g.redis}
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = g.timeout, g.timeout, g.timeout
	opt.MaxRetries = -1 // a retried transaction is the caller's decision
	s := &redisStore{client: redis.NewClient(opt), addr: opt.Addr}
	switch {
	case g.redisKeys == "default":
		s.switchKey, s.usersKey, s.addrsKey = redisrules.DefaultSwitchKey, redisrules.DefaultUsersKey, redisrules.DefaultAddressesKey
	case g.redisKeys != "":
		parts := strings.Split(g.redisKeys, ",")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			s.client.Close()
			return nil, fmt.Errorf("--redis-keys %q: three key names SWITCH,USERS,ADDRESSES, or default", g.redisKeys)
		}
		s.switchKey, s.usersKey, s.addrsKey = parts[0], parts[1], parts[2]
	default:
		s.docKey = g.redisKey
		if s.docKey == "" {
			s.docKey = redisrules.DefaultDocumentKey
		}
	}
	return s, nil
}
