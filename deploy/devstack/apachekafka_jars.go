package devstack

// The jars of Apache Kafka's broker, fetched once with Maven into a cache
// folder shared by every program and test package on this machine.

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed" // the pom and the logging configuration
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ApacheKafkaVersion is the version of Apache Kafka StartApacheKafka runs.
const ApacheKafkaVersion = "4.4.0"

//go:embed apachekafka/pom.xml
var kafkaPom []byte

//go:embed apachekafka/log4j2.properties
var kafkaLog4j []byte

// jarsComplete is written into a jar folder once Maven has filled it, so a
// folder left by a killed fetch is never used.
const jarsComplete = ".complete"

// KafkaJarsDir is the folder the broker's jars are cached in:
// $XDG_CACHE_HOME/seckill (or ~/.cache/seckill) / kafka-<version>-<pom hash>.
// A change to the pom names a new folder, so an old cache is never reused
// for it.
func KafkaJarsDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("devstack: no cache folder for the kafka jars (set XDG_CACHE_HOME or HOME): %w", err)
	}
	sum := sha256.Sum256(kafkaPom)
	return filepath.Join(base, "seckill", "kafka-"+ApacheKafkaVersion+"-"+hex.EncodeToString(sum[:4])), nil
}

// FetchKafkaJars returns the folder holding Apache Kafka's broker jars,
// fetching them with Maven from Maven Central first when they are not
// cached yet (about 45 jars, 43 MB). Programs fetching at once each fetch
// into a folder of their own and rename it into place; the first rename
// wins and the others use it.
func FetchKafkaJars(ctx context.Context, log *slog.Logger) (string, error) {
	log = logger(log)
	dir, err := KafkaJarsDir()
	if err != nil {
		return "", err
	}
	if jarsReady(dir) {
		return dir, nil
	}
	mvn, err := findBinary("mvn", "maven", "/usr/bin", "/usr/local/bin")
	if err != nil {
		return "", err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("devstack: kafka jar cache: %w", err)
	}
	removeStaleFetches(parent, filepath.Base(dir))
	tmp, err := os.MkdirTemp(parent, filepath.Base(dir)+".fetch-*")
	if err != nil {
		return "", fmt.Errorf("devstack: kafka jar cache: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after the rename; left over only on failure
	pom := filepath.Join(tmp, "pom.xml")
	if err := os.WriteFile(pom, kafkaPom, 0o644); err != nil {
		return "", fmt.Errorf("devstack: kafka jar cache: %w", err)
	}
	log.Info("devstack: fetching the Apache Kafka jars with Maven (once per machine)", "version", ApacheKafkaVersion, "into", dir)
	began := time.Now()
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", pom, "dependency:copy-dependencies",
		"-DoutputDirectory="+filepath.Join(tmp, "libs"))
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("devstack: maven could not fetch the Apache Kafka jars (%w); it needs Maven Central (https://repo.maven.apache.org) or a mirror in ~/.m2/settings.xml; its output ends with:\n%s",
			err, indent(lastLines(strings.TrimSpace(out.String()), 20)))
	}
	if err := os.WriteFile(filepath.Join(tmp, jarsComplete), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("devstack: kafka jar cache: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if jarsReady(dir) { // another program fetched at the same time and won
			return dir, nil
		}
		// A folder without the marker was not made by this code's rename
		// (a copy by hand, a disk error): replace it.
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			return "", fmt.Errorf("devstack: kafka jar cache %s is incomplete and cannot be removed: %w", dir, rmErr)
		}
		if err := os.Rename(tmp, dir); err != nil && !jarsReady(dir) {
			return "", fmt.Errorf("devstack: kafka jar cache: %w", err)
		}
	}
	log.Info("devstack: fetched the Apache Kafka jars", "dir", dir, "took", time.Since(began).Round(time.Millisecond))
	return dir, nil
}

// jarsReady reports whether dir holds a completed fetch.
func jarsReady(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, jarsComplete))
	return err == nil
}

// removeStaleFetches removes the temporary folders of fetches that began
// over an hour ago: their program was killed (a fetch takes under a minute).
func removeStaleFetches(parent, base string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, base+".fetch-*"))
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > time.Hour {
			_ = os.RemoveAll(d)
		}
	}
}

// kafkaClasspath is the java -cp value for the jars in dir.
func kafkaClasspath(dir string) (string, error) {
	jars, err := filepath.Glob(filepath.Join(dir, "libs", "*.jar"))
	if err != nil || len(jars) == 0 {
		return "", errors.Join(fmt.Errorf("devstack: no jars in %s/libs: remove %s and run again to fetch them", dir, dir), err)
	}
	return filepath.Join(dir, "libs", "*"), nil // java expands the wildcard itself
}
