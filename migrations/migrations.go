// Package migrations holds the database schema as embedded SQL files and
// applies them with tern, each file in one transaction.
package migrations

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed *.sql
var files embed.FS

// versionTable is where tern records how far the schema has come.
const versionTable = "schema_version"

// Apply brings the database at conn up to the newest schema. It is safe to
// call from many processes at once: tern holds an advisory lock while it works.
func Apply(ctx context.Context, conn *pgx.Conn) error {
	m, err := migrate.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return fmt.Errorf("migrations: prepare: %w", err)
	}
	if err := m.LoadMigrations(files); err != nil {
		return fmt.Errorf("migrations: load: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrations: apply: %w", err)
	}
	return nil
}

// ApplyURL connects to databaseURL, applies the migrations and disconnects.
func ApplyURL(ctx context.Context, databaseURL string) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return Apply(ctx, conn)
}
