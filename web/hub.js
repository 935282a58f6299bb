// Input from the Hugging Face Hub: a model id (owner/name, owner/name@revision or a
// huggingface.co URL) becomes the same list of files a dropped folder gives. The small files the
// core reads (config.json, the tokenizer's) are fetched whole as Files; each *.safetensors shard
// becomes a descriptor { name, size, remote } that the workers read by range (remote_file.js),
// front to back as they read a local shard, never whole. The Hub's own client (npm
// @huggingface/hub, vendored as vendor/hub.js) lists the repository and resolves each file.
//
// What the Hub sends is untrusted: names, sizes and kinds are checked before anything uses them,
// and only the repository's top-level files are taken (nothing it names becomes a path here).
// Loaded only when the user opens a model from the Hub, so the page starts (and works offline)
// without it.

// Where the Hub is: huggingface.co, or the tests' stand-in (set before the page loads).
export const hubUrl = () => globalThis.LEAPCONV_HUB_URL || 'https://huggingface.co';

const NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?$/;  // an owner or repository name (as the Hub allows them)
const REVISION = /^[A-Za-z0-9._/-]{1,255}$/;
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const MAX_FILES = 10000;         // a listing longer than this is refused (the largest real repositories hold a few hundred)
const SMALL_FILE_MAX = 256 << 20;  // a config or tokenizer file larger than this is refused, not fetched

// "owner/name", "owner/name@rev", "https://huggingface.co/owner/name[/tree/rev[/]]" (or hf.co)
// -> { repo: 'owner/name', revision }. Throws one sentence saying what is wrong.
export function parseModelId(text) {
  let s = String(text || '').trim();
  if (!s) throw new Error('Type a model id such as "owner/name" (or paste its huggingface.co address).');
  let revision = 'main';
  const url = /^https?:\/\/(?:www\.)?(?:huggingface\.co|hf\.co)\/(.*)$/i.exec(s);
  if (url) {
    const parts = url[1].split(/[?#]/)[0].split('/').filter(Boolean);
    if (parts[0] === 'models') parts.shift();
    if (parts.length >= 4 && (parts[2] === 'tree' || parts[2] === 'blob' || parts[2] === 'resolve')) {
      revision = decodeURIComponent(parts.slice(3).join('/'));
      // (a /blob/rev/file address names a file: keep its revision, the model is the repository)
      if (parts[2] !== 'tree') revision = decodeURIComponent(parts[3]);
    } else if (parts.length !== 2) {
      throw new Error(`"${s.slice(0, 100)}" is not a model's address: it should look like https://huggingface.co/owner/name.`);
    }
    s = parts.slice(0, 2).join('/');
  } else if (/^[a-z]+:\/\//i.test(s)) {
    throw new Error('Only models on huggingface.co can be opened by address (or type "owner/name").');
  } else {
    const at = s.lastIndexOf('@');
    if (at > 0) [s, revision] = [s.slice(0, at), s.slice(at + 1)];
  }
  const [owner, name, ...rest] = s.split('/');
  if (rest.length || !name || !NAME.test(owner) || !NAME.test(name))
    throw new Error(`"${s.slice(0, 100)}" is not a model id: it is "owner/name", letters, digits, "-", "_" and "." (for example meta-llama/Llama-3.2-1B).`);
  if (!REVISION.test(revision) || revision.split('/').includes('..'))
    throw new Error(`"${revision.slice(0, 100)}" is not a branch, tag or commit name.`);
  return { repo: `${owner}/${name}`, revision };
}

// The Hub client's error (HubApiError: statusCode, message) or a network failure, as one
// sentence with what to do. what: 'list' (the repository) or a file's name.
export function hubErrorText(e, { repo, revision, token, what }) {
  const status = e && e.statusCode;
  const msg = String(e && e.message || e);
  const page = `${hubUrl()}/${repo}`;
  if (!status) {
    if (e instanceof TypeError || /fetch|network/i.test(msg))
      return `Could not reach the Hub (${new URL(hubUrl()).host}): check the connection and try again. (Files on this computer work offline.)`;
    return `The Hub's answer for ${repo} could not be read: ${msg}`;
  }
  const gated = /gated|restricted|access to (model|this)/i.test(msg);
  if (status === 401 && token && !gated)
    return 'The Hub rejected the access token (HTTP 401): check that it is a current token with read access (huggingface.co/settings/tokens).';
  if ((status === 401 || status === 403) && gated)
    return token
      ? `${repo} is gated and this token's account has not been granted access: open ${page}, accept its conditions, then try again.`
      : `${repo} is gated: open ${page}, accept its conditions, then paste an access token of that account below.`;
  if (status === 404 && /revision|invalid rev/i.test(msg)) return `${repo} has no branch, tag or commit "${revision}".`;
  if (status === 401 || (status === 404 && what === 'list'))
    return token
      ? `No model ${repo} on the Hub that this token can see: check the id (owner/name).`
      : `No model ${repo} on the Hub (or it is private): check the id (owner/name); for a private model, paste an access token below.`;
  if (status === 403) return `The Hub refused ${what === 'list' ? repo : what} (HTTP 403): this token has no read access to it.`;
  if (status === 404) return `${what} is listed in ${repo} but the Hub could not find it (HTTP 404): try again in a moment.`;
  if (status === 429) return 'The Hub is limiting requests from this address (HTTP 429): wait a minute, then try again.';
  if (status >= 500) return `The Hub answered HTTP ${status} for ${repo}: it may be down for a moment; try again shortly.`;
  return `The Hub answered HTTP ${status} for ${repo}: ${msg.slice(0, 200)}`;
}

// The repository's top-level files, checked: [{ path, size, lfs }].
export function checkedEntries(entries, repo) {
  const out = [], seen = new Set();
  for (const e of entries) {
    if (!e || typeof e !== 'object' || typeof e.path !== 'string') throw new Error(`the Hub's file list for ${repo} has an entry without a name`);
    if (e.type === 'directory') continue;
    const p = e.path;
    if (!p || p.includes('/') || p.includes('\\') || p === '.' || p === '..' || CONTROL.test(p) || p.length > 255)
      throw new Error(`the Hub's file list for ${repo} names a file "${p.slice(0, 80).replace(CONTROL, '?')}", which is not a plain file name: refused`);
    if (!Number.isSafeInteger(e.size) || e.size < 0) throw new Error(`the Hub's file list for ${repo} gives ${p} an impossible size (${e.size})`);
    if (e.lfs && (!Number.isSafeInteger(e.lfs.size) || e.lfs.size !== e.size)) throw new Error(`the Hub's file list for ${repo} gives ${p} two sizes`);
    if (seen.has(p)) throw new Error(`the Hub's file list for ${repo} names ${p} twice`);
    seen.add(p);
    // (the sha256 an LFS file's listing gives, when it is one: its bytes' ETag must be the same)
    const sha256 = e.lfs && typeof e.lfs.oid === 'string' && /^[0-9a-f]{64}$/.test(e.lfs.oid) ? e.lfs.oid : '';
    out.push({ path: p, size: e.size, lfs: !!(e.lfs || e.xetHash), sha256 });
    if (out.length > MAX_FILES) throw new Error(`${repo} lists more than ${MAX_FILES} files at its top level: refused`);
  }
  return out;
}

const LFS_MAGIC = 'version https://git-lfs.github.com/spec/';

// An Error whose message is the sentence the page shows as it is.
const sentence = (text) => Object.assign(new Error(text), { hubSentence: true });

// Lists and resolves a model on the Hub. wanted(name): the files the core reads. onStep(text):
// what it is doing (for the status line). Returns { label, files, listed } where files are Files
// (small ones, fetched) and shard descriptors, or throws an Error whose message is the sentence
// to show.
export async function openFromHub({ repo, revision, token }, wanted, onStep = () => {}) {
  const hub = await import('./vendor/hub.js');
  const common = { repo: { type: 'model', name: repo }, revision, hubUrl: hubUrl(), ...(token ? { accessToken: token } : {}) };
  // A redirect to an address outside the Hub's own (which the page's CSP does not let it fetch)
  // fails like a lost connection: the policy's report says which it was.
  const blocked = [];
  const onBlocked = (e) => blocked.push(e.blockedURI);
  globalThis.document?.addEventListener('securitypolicyviolation', onBlocked);
  try {
    return await listAndResolve();
  } catch (e) {
    if (e.unreachable) {
      await new Promise((r) => setTimeout(r, 100));  // (the policy's report comes as a task of its own, after the failure)
      // (a redirect's report names the URL before it: the Hub's own, which the policy allows)
      const elsewhere = blocked.find((u) => /^https?:/.test(u));
      if (elsewhere)
        throw sentence(elsewhere.startsWith(hubUrl() + '/')
          ? `The Hub redirected ${e.what === 'list' ? 'the listing' : e.what} to an address outside its own: refused (this page fetches only from huggingface.co and its CDNs).`
          : `${new URL(elsewhere).origin} is not one of the Hub's own addresses: refused (this page fetches only from huggingface.co and its CDNs).`);
    }
    throw e;
  } finally {
    globalThis.document?.removeEventListener('securitypolicyviolation', onBlocked);
  }

  async function listAndResolve() {
    const fail = (e, what) => {
      if (e && e.hubSentence) throw e;
      throw Object.assign(sentence(hubErrorText(e, { repo, revision, token, what })), { unreachable: !(e && e.statusCode), what });
    };
    onStep(`Listing ${repo}${revision !== 'main' ? '@' + revision : ''} on the Hub…`);
    let entries = [];
    try {
      for await (const e of hub.listFiles({ ...common, recursive: false, expand: false })) {
        entries.push(e);
        if (entries.length > MAX_FILES) break;
      }
    } catch (e) {
      fail(e, 'list');
    }
    let listed;
    try {
      listed = checkedEntries(entries, repo);
    } catch (e) {
      throw sentence(`${e.message}.`);
    }
    const shards = listed.filter((f) => f.path.endsWith('.safetensors'));
    if (!shards.length) {
      const pickles = listed.filter((f) => /\.(bin|pt|pth|ckpt)$/i.test(f.path)).map((f) => f.path);
      const ggufs = listed.filter((f) => /\.gguf$/i.test(f.path)).map((f) => f.path);
      throw sentence(ggufs.length
        ? `${repo} holds GGUF files (${ggufs.slice(0, 2).join(', ')}), not a checkpoint to convert: it is already converted. Download one and open it here to see what it holds.`
        : pickles.length
          ? `${repo} has only PyTorch pickle weights (${pickles.slice(0, 2).join(', ')}), no *.safetensors: this page reads only safetensors (a pickle can run code when it is loaded, and needs PyTorch to read). Look for a safetensors version of the model.`
          : `${repo}${revision !== 'main' ? '@' + revision : ''} has no *.safetensors files at its top level: not a checkpoint this page reads.`);
    }
    // The ETag the shard's bytes come with (its first 8 bytes fetched as the workers fetch them, by
    // range from where the Hub redirects): every later range must come with the same one, so a
    // file replaced on the Hub after it was opened is an error, not a model of two versions.
    // ('' where the server sends none: then only the size is checked.)
    const firstEtag = async (url, f) => {
      let resp;
      try {
        resp = await fetch(url, { headers: { Range: 'bytes=0-7', ...(token ? { Authorization: `Bearer ${token}` } : {}) }, cache: 'no-store' });
      } catch (e) {
        fail(e, f.path);
      }
      if (resp.status !== 206) fail({ statusCode: resp.status, message: `HTTP ${resp.status}` }, f.path);
      const total = Number((resp.headers.get('Content-Range') || '').split('/')[1]);
      if (total !== f.size) throw sentence(`${f.path} is listed as ${f.size} bytes but its server says ${total}: the repository changed while it was opened; open it again.`);
      const etag = resp.headers.get('ETag') || '';
      // Where the ETag is a sha256 (as the Hub's X-Linked-ETag is), it must be the one listed.
      const hex = /^(?:W\/)?"?([0-9a-f]{64})"?$/.exec(etag);
      if (hex && f.sha256 && hex[1] !== f.sha256)
        throw sentence(`${f.path} changed on the Hub since it was listed (its sha256 was ${f.sha256.slice(0, 12)}…, its bytes now come as ${hex[1].slice(0, 12)}…): open it again.`);
      return etag;
    };
    const files = [];
    const take = listed.filter((f) => wanted(f.path));
    for (const f of take) {
      const isShard = f.path.endsWith('.safetensors');
      onStep(`Resolving ${f.path} (${files.length + 1} of ${take.length})…`);
      let info;
      try {
        info = await hub.fileDownloadInfo({ ...common, path: f.path });
      } catch (e) {
        fail(e, f.path);
      }
      if (!info) fail(Object.assign(new Error('not found'), { statusCode: 404 }), f.path);
      if (info.size !== f.size)
        throw sentence(`${f.path} is ${info.size} bytes on the Hub but listed as ${f.size}: the repository changed while it was listed; open it again.`);
      // a shard stored in git itself, not in LFS, of ~130 bytes: an LFS pointer pushed without LFS
      if (isShard && !f.lfs && f.size < 1024) {
        let head;
        try {
          head = await (await hub.downloadFile({ ...common, path: f.path, xet: false, downloadInfo: info })).slice(0, 200).text();
        } catch (e) {
          fail(e, f.path);
        }
        if (head.startsWith(LFS_MAGIC))
          throw sentence(`${f.path} in ${repo} is a Git LFS pointer (${f.size} bytes), not the weights: the files were pushed without Git LFS. Tell the repository's owner; there is nothing to convert.`);
      }
      if (isShard) {
        files.push({ name: f.path, size: f.size, remote: { url: info.url, token: token || '', etag: await firstEtag(info.url, f) } });
      } else {
        if (f.size > SMALL_FILE_MAX) throw sentence(`${f.path} in ${repo} is ${f.size} bytes, too large for a ${f.path} file: refused.`);
        let bytes;
        try {
          bytes = await (await hub.downloadFile({ ...common, path: f.path, xet: false, downloadInfo: info })).arrayBuffer();
        } catch (e) {
          fail(e, f.path);
        }
        if (bytes.byteLength !== f.size)
          throw sentence(`${f.path} came from the Hub with ${bytes.byteLength} bytes, not the ${f.size} it lists: try again.`);
        files.push(new File([bytes], f.path));
      }
    }
    // (named after the repository, as the folder a download makes: the revision is not part of the model's name)
    const label = repo.split('/')[1];
    return { label, files, listed, repo, revision };
  }
}
