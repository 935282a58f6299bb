const params = new URLSearchParams(location.search);
const w = new Worker('_probe_a.js?' + params.toString());
window.result = null;
w.onmessage = ({ data }) => { window.result = data; };
