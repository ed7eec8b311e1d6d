package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/wdc-dev/wdc/agent"
	"github.com/wdc-dev/wdc/protocol"
)

// AgentCmd runs one worker: it registers with the coordinator at --server,
// heartbeats, claims tasks its pool's labels allow and runs them. Providers
// start it (`wdc apply` launches local workers this way); the pool's bearer
// token comes only from the WDC_WORKER_TOKEN environment variable.
type AgentCmd struct {
	Server       string        `name:"server" required:"" placeholder:"URL" help:"Coordinator base URL, e.g. http://127.0.0.1:7420."`
	Pool         string        `name:"pool" placeholder:"NAME" help:"Pool this worker expects to join; registration fails if its token belongs to another pool."`
	WorkDir      string        `name:"work-dir" placeholder:"DIR" default:"." help:"Work folder: attempt logs go to logs/<task>/<attempt>/, scratch folders to scratch/<task>/<attempt>/."`
	DrainTimeout time.Duration `name:"drain-timeout" default:"60s" help:"On SIGTERM or SIGINT, how long running attempts may finish before they are killed."`
}

// Run runs the agent until it drains (first SIGTERM/SIGINT, or the
// coordinator asks) or fails; a second signal exits at once with code 1.
func (c *AgentCmd) Run(e *env) error {
	token := e.getenv(protocol.TokenEnv)
	if token == "" {
		return fmt.Errorf("no worker token: set %s in the environment (apply's providers do)", protocol.TokenEnv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	logger := slog.New(slog.NewTextHandler(e.stderr, nil))
	go func() {
		select {
		case s := <-sigs:
			logger.Info("signal received: draining", "signal", s.String(), "drain_timeout", c.DrainTimeout)
			cancel()
		case <-ctx.Done():
			return
		}
		if s, ok := <-sigs; ok {
			logger.Warn("second signal: exiting at once", "signal", s.String())
			os.Exit(1)
		}
	}()
	return agent.Run(ctx, agent.Options{
		ServerURL:    c.Server,
		Pool:         c.Pool,
		Token:        token,
		WorkDir:      c.WorkDir,
		DrainTimeout: c.DrainTimeout,
		Logger:       logger,
		Version:      Version,
		Environ:      e.environ,
	})
}
