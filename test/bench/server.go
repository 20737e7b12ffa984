package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// serverSettingNames are the settings a CREATE DATABASE's cost depends
// on, printed with every run: how much it writes (wal_level,
// full_page_writes), whether it waits for the disk (fsync,
// synchronous_commit), how often the server checkpoints (checkpoint_timeout,
// max_wal_size) and how much of the copy stays in shared memory
// (shared_buffers).
var serverSettingNames = []string{"server_version", "shared_buffers", "wal_level", "fsync", "synchronous_commit", "full_page_writes", "checkpoint_timeout", "max_wal_size"}

// serverInfo is the server's settings of serverSettingNames, in that
// order, and the strategy its CREATE DATABASE uses.
type serverInfo struct {
	Settings []string // "name=value"
	Strategy string
}

func (s serverInfo) String() string {
	if len(s.Settings) == 0 {
		return "unknown"
	}
	return strings.Join(s.Settings, ", ") + "; CREATE DATABASE STRATEGY " + s.Strategy
}

// createDatabaseStrategy is the strategy of a CREATE DATABASE that names
// none (the provider names none) on a server of major version major.
func createDatabaseStrategy(major int) string {
	if major < 15 {
		return "file_copy (the only one before 15: a checkpoint before and after each copy)"
	}
	return "wal_log (the default since 15: the copy goes through shared buffers and the WAL, no checkpoint)"
}

// readServer reads serverInfo over the superuser session.
func readServer(ctx context.Context, c *pgx.Conn) (serverInfo, error) {
	var s serverInfo
	for _, name := range serverSettingNames {
		var v string
		if err := c.QueryRow(ctx, "SELECT pg_catalog.current_setting($1::pg_catalog.text)", name).Scan(&v); err != nil {
			return s, fmt.Errorf("reading %s: %w", name, err)
		}
		s.Settings = append(s.Settings, name+"="+v)
	}
	var major int
	if err := c.QueryRow(ctx, "SELECT pg_catalog.current_setting('server_version_num'::pg_catalog.text)::pg_catalog.int4 / 10000").Scan(&major); err != nil {
		return s, err
	}
	s.Strategy = createDatabaseStrategy(major)
	return s, nil
}

// serverActivity is what the server and the machine did during a phase:
// checkpoints and WAL written by the server, the machine's dirty page
// cache (what is written but not yet on the disk) and its tasks' time
// stalled on I/O (machine-wide: other users of the machine count too).
type serverActivity struct {
	Checkpoints int64
	WALBytes    int64
	// DirtyKiB is /proc/meminfo's Dirty at the sample.
	DirtyKiB int64
	// IOStallUS is /proc/pressure/io's "some" total (microseconds).
	IOStallUS int64
}

// readActivity samples serverActivity. The checkpoint counters moved from
// pg_stat_bgwriter to pg_stat_checkpointer in PostgreSQL 17.
func readActivity(ctx context.Context, c *pgx.Conn) (serverActivity, error) {
	var a serverActivity
	var major int
	if err := c.QueryRow(ctx, "SELECT pg_catalog.current_setting('server_version_num'::pg_catalog.text)::pg_catalog.int4 / 10000").Scan(&major); err != nil {
		return a, err
	}
	q := "SELECT num_timed + num_requested FROM pg_catalog.pg_stat_checkpointer"
	if major < 17 {
		q = "SELECT checkpoints_timed + checkpoints_req FROM pg_catalog.pg_stat_bgwriter"
	}
	if err := c.QueryRow(ctx, q).Scan(&a.Checkpoints); err != nil {
		return a, err
	}
	if err := c.QueryRow(ctx, "SELECT wal_bytes::pg_catalog.int8 FROM pg_catalog.pg_stat_wal").Scan(&a.WALBytes); err != nil {
		return a, err
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		a.DirtyKiB = meminfoKiB(string(b), "Dirty")
	}
	if b, err := os.ReadFile("/proc/pressure/io"); err == nil {
		a.IOStallUS = pressureTotal(string(b))
	}
	return a, nil
}

// meminfoKiB is the value in kB of key in /proc/meminfo's text.
func meminfoKiB(text, key string) int64 {
	for _, l := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// pressureTotal is the "some" line's total= of a /proc/pressure file.
func pressureTotal(text string) int64 {
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "some ") {
			continue
		}
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return 0
}

// activityNote describes what happened between a and b for n CREATE
// DATABASE statements.
func activityNote(a, b serverActivity, n int) string {
	wal := float64(b.WALBytes-a.WALBytes) / (1 << 20)
	return fmt.Sprintf("%d checkpoints, %.0f MiB of WAL (%.1f MiB per CREATE DATABASE), dirty page cache %.0f → %.0f MiB, tasks stalled on I/O %.1f s (machine-wide)",
		b.Checkpoints-a.Checkpoints, wal, wal/float64(n), float64(a.DirtyKiB)/1024, float64(b.DirtyKiB)/1024, float64(b.IOStallUS-a.IOStallUS)/1e6)
}
