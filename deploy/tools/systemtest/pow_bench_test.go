package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/flashsale/seckill/web"
)

// powBenchJS solves 12-bit challenges with the page's solver (web/pow.js),
// in a Web Worker as the page runs it, or on the page's own thread, and
// answers the hashes tried and the milliseconds taken.
const powBenchJS = `(async () => {
  const solves = %d, worker = %t;
  let hashes = 0, ms = 0;
  let solve;
  if (!worker) {
    const src = await (await fetch('pow.js')).text();
    solve = new Function('self', src + '; return solve;')({ postMessage() {} });
  }
  for (let i = 0; i < solves; i++) {
    const salt = 'bench' + i + Math.random().toString(16).slice(2);
    const r = worker ? await new Promise((resolve, reject) => {
      const w = new Worker('pow.js');
      w.onmessage = (ev) => {
        if (ev.data.progress) return;
        w.terminate();
        ev.data.error ? reject(new Error(ev.data.error)) : resolve(ev.data);
      };
      w.postMessage({ salt, bits: 12 });
    }) : await solve(salt, 12);
    hashes += r.hashes; ms += r.ms;
  }
  return [hashes, ms];
})()`

// BenchmarkPoWBrowser is a shopper's side of the proof of work: the page's
// solver in headless Chromium, at CPU throttling 1x (this machine), 4x and
// 6x (DevTools' Emulation.setCPUThrottlingRate, the usual stand-in for a
// mid-range and a low-end phone), in the Worker and on the page's thread.
// Each op is one 12-bit solve; hashes/s is the rate behind the README's
// table (Challenges): a challenge of b bits takes 2^b / (hashes/s) seconds
// on average.
func BenchmarkPoWBrowser(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServerFS(web.FS()))
	mux.HandleFunc("/bench", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>pow bench</title>")
	})
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	for _, rate := range []float64{1, 4, 6} {
		for _, worker := range []bool{true, false} {
			where := "worker"
			if !worker {
				where = "page"
			}
			b.Run(fmt.Sprintf("throttle=%gx/%s", rate, where), func(b *testing.B) {
				ctx := benchBrowser(b)
				if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/bench")); err != nil {
					b.Fatal(err)
				}
				if _, err := chromedp.Call(ctx, emulation.SetCPUThrottlingRate, emulation.SetCPUThrottlingRateParams{Rate: rate}); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				out, err := chromedp.Run(ctx, chromedp.Evaluate[[2]float64](fmt.Sprintf(powBenchJS, b.N, worker), chromedp.EvalAwaitPromise))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(out[0]/out[1]*1000, "hashes/s")
			})
		}
	}
}

// benchBrowser is a headless Chromium for a benchmark.
func benchBrowser(b *testing.B) context.Context {
	b.Helper()
	path := ""
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := exec.LookPath(p); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		b.Fatal("chromium is not installed (apt-get install chromium, or make deps)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(b.TempDir()))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	b.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		b.Fatal(err)
	}
	return ctx
}
