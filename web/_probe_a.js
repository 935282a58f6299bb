const params = new URLSearchParams(self.location.search);
const usePool = params.get('pool') === '1';
const n = Number(params.get('n') || 20);
const spawn = () => new Promise((resolve) => {
  const b = new Worker('_probe_b.js');
  const t = setTimeout(() => { b.terminate(); resolve('timeout'); }, 5000);
  b.onmessage = () => { clearTimeout(t); b.terminate(); resolve('ok'); };
  b.onerror = (e) => { clearTimeout(t); resolve('error ' + e.message); };
});
(async () => {
  if (usePool) {
    importScripts('dist/converter-mt.js');
    const M = await createConverter({ mainScriptUrlOrBlob: new URL('dist/converter-mt.js', self.location.href).href,
      locateFile: (p) => new URL('dist/' + p, self.location.href).href });
  }
  const out = [];
  for (let i = 0; i < n; i++) { const t = performance.now(); out.push(await spawn() + ' ' + Math.round(performance.now() - t)); }
  postMessage(out);
})();
