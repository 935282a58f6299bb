// call(type, payload) on a worker (web/worker.js): a promise of its answer. Messages without an
// id (progress, started, done) go to the listeners.
export function rpc(w, listeners = {}) {
  let nextId = 1;
  const pending = new Map();
  w.onmessage = (e) => {
    const m = e.data;
    if (listeners[m.type]) return listeners[m.type].forEach((f) => f(m));
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.type.endsWith(':ok')) p.resolve(m.result);
    else p.reject(Object.assign(new Error(m.error), { cancelled: m.cancelled, advice: m.advice || '' }));
  };
  // (transfer: what the message moves rather than copies, a MessagePort)
  const call = (type, payload = {}, transfer = []) => {
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      w.postMessage({ type, id, ...payload }, transfer);
    });
  };
  call.failAll = (err) => { for (const p of pending.values()) p.reject(err); pending.clear(); };
  return call;
}
