package tracing

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/tracelog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// maxStatement bounds the SQL text a span carries.
const maxStatement = 300

// PgxTracer is what a pgx connection config's Tracer gets: a span for each
// query and each batch made inside a traced context (when p is enabled),
// and pgx's own log lines, at warn and above, through log (tracelog).
func PgxTracer(p *Provider, log *slog.Logger) pgx.QueryTracer {
	tl := &tracelog.TraceLog{Logger: tracelog.LoggerFunc(func(ctx context.Context, level tracelog.LogLevel, msg string, data map[string]any) {
		attrs := make([]slog.Attr, 0, len(data)+1)
		for k, v := range data {
			if k == "args" {
				// A statement's values may be secrets (a password's
				// hash, a token); its SQL says which statement it was.
				continue
			}
			attrs = append(attrs, slog.Any(k, v))
		}
		attrs = append(attrs, slog.String("component", "pgx"))
		lvl := pgxLevel(level)
		err, _ := data["err"].(error)
		var pgErr *pgconn.PgError
		switch {
		case errors.Is(err, context.Canceled):
			// A query given up by its caller (a request gone, a
			// shutdown) is the caller's business, not a database error.
			lvl = slog.LevelDebug
		case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "23"):
			// A constraint the caller leans on (a username taken, an
			// order already written): the caller turns it into its
			// answer, so it is no error of the database.
			lvl = slog.LevelDebug
		}
		log.LogAttrs(ctx, lvl, "pgx: "+msg, attrs...)
	}), LogLevel: tracelog.LogLevelWarn}
	if !p.Enabled() {
		return tl
	}
	return multitracer.New(pgxSpans{t: p.Tracer()}, tl)
}

// pgxLevel maps pgx's levels to slog's.
func pgxLevel(l tracelog.LogLevel) slog.Level {
	switch {
	case l >= tracelog.LogLevelDebug:
		return slog.LevelDebug
	case l == tracelog.LogLevelInfo:
		return slog.LevelInfo
	case l == tracelog.LogLevelWarn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// pgxSpans makes the spans. A query outside a traced context (the
// catalog's refresh, the sweeper's scan) makes none: a span of its own
// would be a trace of one statement.
type pgxSpans struct{ t trace.Tracer }

func (s pgxSpans) start(ctx context.Context, name, sql string) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	// The statement's first word names the span (postgresql INSERT): few
	// names, and a trace read at a glance.
	if verb, _, _ := strings.Cut(strings.TrimSpace(sql), " "); verb != "" && len(verb) <= 10 {
		name += " " + strings.ToUpper(verb)
	}
	ctx, _ = s.t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", "postgresql"),
			attribute.String("db.query.text", statement(sql))))
	return ctx
}

func end(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// statement is sql on one line, bounded.
func statement(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > maxStatement {
		sql = sql[:maxStatement] + "..."
	}
	return sql
}

// TraceQueryStart implements pgx.QueryTracer.
func (s pgxSpans) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return s.start(ctx, "postgresql", d.SQL)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (s pgxSpans) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	end(ctx, d.Err)
}

// TraceBatchStart implements pgx.BatchTracer.
func (s pgxSpans) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	sql := ""
	if d.Batch != nil && len(d.Batch.QueuedQueries) > 0 {
		sql = d.Batch.QueuedQueries[0].SQL
	}
	ctx = s.start(ctx, "postgresql batch", sql)
	if d.Batch != nil {
		trace.SpanFromContext(ctx).SetAttributes(attribute.Int("db.operation.batch.size", d.Batch.Len()))
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (pgxSpans) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (pgxSpans) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchEndData) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	end(ctx, d.Err)
}
