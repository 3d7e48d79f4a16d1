package nacos

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	sdklog "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
)

// sdkLogger hands the SDK's log lines to a slog.Logger, from a minimum
// level on. The SDK keeps one logger per process; a Client installs its
// own (see Client). Unlike the SDK's rotating file writer it holds no
// file and no goroutine, so closing a Client leaves nothing behind.
type sdkLogger struct {
	l   *slog.Logger
	min slog.Level
}

// newSDKLogger returns the logger for the SDK's level name (debug, info,
// warn, error; anything else counts as error).
func newSDKLogger(l *slog.Logger, level string) *sdkLogger {
	min := slog.LevelError
	switch strings.ToLower(level) {
	case "debug":
		min = slog.LevelDebug
	case "info":
		min = slog.LevelInfo
	case "warn":
		min = slog.LevelWarn
	}
	return &sdkLogger{l: l, min: min}
}

func (s *sdkLogger) log(level slog.Level, msg string) {
	if level < s.min {
		return
	}
	s.l.Log(context.Background(), level, "nacos-sdk: "+firstLine(fmt.Errorf("%s", msg)))
}

func (s *sdkLogger) Info(args ...any)  { s.log(slog.LevelInfo, fmt.Sprint(args...)) }
func (s *sdkLogger) Warn(args ...any)  { s.log(slog.LevelWarn, fmt.Sprint(args...)) }
func (s *sdkLogger) Error(args ...any) { s.log(slog.LevelError, fmt.Sprint(args...)) }
func (s *sdkLogger) Debug(args ...any) { s.log(slog.LevelDebug, fmt.Sprint(args...)) }

func (s *sdkLogger) Infof(f string, args ...any)  { s.log(slog.LevelInfo, fmt.Sprintf(f, args...)) }
func (s *sdkLogger) Warnf(f string, args ...any)  { s.log(slog.LevelWarn, fmt.Sprintf(f, args...)) }
func (s *sdkLogger) Errorf(f string, args ...any) { s.log(slog.LevelError, fmt.Sprintf(f, args...)) }
func (s *sdkLogger) Debugf(f string, args ...any) { s.log(slog.LevelDebug, fmt.Sprintf(f, args...)) }

// installSDKLogger sets the SDK's process-wide logger for a Client: its
// rotating files in the log folder when WithLogDir was given, else
// graylb's logger. It returns what to install again after an SDK
// constructor replaced it (the SDK's config client does).
func installSDKLogger(cfg *config, cc constant.ClientConfig) (sdklog.Logger, error) {
	if cfg.logDir != "" {
		l, err := sdklog.InitNacosLogger(sdklog.BuildLoggerConfig(cc))
		if err != nil {
			return nil, err
		}
		sdklog.SetLogger(l)
		return l, nil
	}
	l := newSDKLogger(cfg.logger, cfg.logLevel)
	sdklog.SetLogger(l)
	return l, nil
}
