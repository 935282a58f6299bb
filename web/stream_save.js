// A streamed download: the converted file goes to the browser's downloads as it is written, through
// the service worker (sw.js answers download/<id> with the bytes the converting worker sends on a
// MessagePort). For a browser that keeps no files for the page (no OPFS: WebKit in a private or
// automated session) and a file too large to build in the tab's memory. The core gives such a
// file front to back (the worker's start option in_order), as a download must be written.
'use strict';

// The service worker answers this page now (it does from the second load on, or once it has
// claimed the page after the first).
export const streamSaveReady = () => Boolean(navigator.serviceWorker?.controller);

let lastFrame = null;  // the previous download's frame, removed when the next one starts

// Registers a download of `size` bytes named `name` with the service worker and starts it;
// returns the port the converting worker writes to, and done() for when the conversion ends.
export async function startStreamedDownload(name, size) {
  const sw = navigator.serviceWorker.controller;
  const id = crypto.randomUUID();
  const channel = new MessageChannel();
  await new Promise((resolve, reject) => {
    const late = setTimeout(() => reject(new Error('the service worker did not answer: the file cannot be streamed to your downloads')), 10000);
    channel.port1.onmessage = ({ data }) => {
      if (data.type !== 'registered') return;
      clearTimeout(late);
      resolve();
    };
    sw.postMessage({ type: 'download', id, name, size, port: channel.port2 }, [channel.port2]);
  });
  channel.port1.onmessage = null;
  lastFrame?.remove();
  lastFrame = Object.assign(document.createElement('iframe'), { hidden: true, src: `download/${id}`, title: `download of ${name}` });
  document.body.append(lastFrame);
  // Browsers stop an idle service worker after tens of seconds: a message now and then keeps it
  // while the file streams.
  const ping = setInterval(() => navigator.serviceWorker.controller?.postMessage({ type: 'ping' }), 10000);
  return { port: channel.port1, done: () => clearInterval(ping) };
}
