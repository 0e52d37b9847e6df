// vitrt click-to-segment page. Plain JS, no build step: the server embeds this file as it is.
// Flow: open an image -> POST /v1/embed (once per image; the server caches the embedding) ->
// every click / drag -> POST /v1/segment with the embedding id and all prompts of the current
// object -> the best mask (COCO RLE) is decoded here and drawn over the image.
'use strict';

const $ = (id) => document.getElementById(id);
const imageCanvas = $('image'), overlay = $('overlay'), promptCanvas = $('prompts');

const state = {
  fileName: 'image.png',
  bytes: null,          // what was sent to /v1/embed (Blob)
  width: 0, height: 0,
  embeddingId: null,
  points: [],           // {x, y, label} in image pixels
  box: null,            // [x0, y0, x1, y1]
  actions: [],          // 'point' | 'box' (for undo)
  current: null,        // best mask of the last answer: {rle, mask, score, bbox, area, maskInputId}
  kept: [],             // masks the user kept (and "everything" results)
  seq: 0,               // answers older than the latest request are dropped
  maskVersion: 0,
};
window.vitrt = state;  // for debugging and the browser test

function setState(s) { document.body.dataset.state = s; }
function status(text, isError = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', isError);
}
function enable(on) {
  for (const id of ['undo', 'clear', 'keep', 'everything', 'download-png', 'download-coco']) $(id).disabled = !on;
}

async function api(path, options) {
  const res = await fetch(path, options);
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { error: text }; }
  if (!res.ok) throw new Error(`${res.status}: ${body.error || res.statusText}`);
  return body;
}

// ---- COCO RLE (pycocotools' compressed counts string) ----

function rleCounts(s) {
  const counts = [];
  let p = 0;
  while (p < s.length) {
    let x = 0, k = 0, more = 1, c = 0;
    while (more) {
      c = s.charCodeAt(p) - 48;
      x |= (c & 0x1f) << (5 * k);
      more = c & 0x20;
      p++; k++;
      if (!more && (c & 0x10)) x |= -1 << (5 * k);
    }
    if (counts.length > 2) x += counts[counts.length - 2];
    counts.push(x);
  }
  return counts;
}

// Row-major h*w 0/1 mask from the column-major runs.
function rleDecode(rle) {
  const [h, w] = rle.size;
  const mask = new Uint8Array(h * w);
  let i = 0, v = 0;
  for (const n of rleCounts(rle.counts)) {
    if (v) for (let j = i; j < i + n; j++) mask[(j % h) * w + Math.floor(j / h)] = 1;
    i += n; v ^= 1;
  }
  return mask;
}

// Colour of kept mask i.
function colorOf(i) {
  const hue = (i * 137.508) % 360;  // golden angle: neighbours differ
  return `hsl(${hue.toFixed(0)} 80% 50%)`;
}

// ---- drawing ----

function rgbOf(css) {
  const c = document.createElement('canvas').getContext('2d');
  c.fillStyle = css; c.fillRect(0, 0, 1, 1);
  return c.getImageData(0, 0, 1, 1).data;
}

function drawOverlay() {
  const ctx = overlay.getContext('2d');
  const img = ctx.createImageData(state.width, state.height);
  const paint = (mask, rgb, alpha) => {
    for (let i = 0; i < mask.length; i++) {
      if (!mask[i]) continue;
      const o = 4 * i;
      img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = alpha;
    }
  };
  state.kept.forEach((m, i) => paint(m.mask, rgbOf(m.color || colorOf(i)), 110));
  let area = 0;
  if (state.current) {
    const m = state.current.mask, w = state.width, h = state.height;
    paint(m, [255, 64, 160], 130);
    // A 1-pixel outline (inside pixels with an outside 4-neighbour) so the mask reads on any image.
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const i = y * w + x;
        if (!m[i]) continue;
        if (x === 0 || y === 0 || x === w - 1 || y === h - 1 || !m[i - 1] || !m[i + 1] || !m[i - w] || !m[i + w]) {
          const o = 4 * i;
          img.data[o] = 255; img.data[o + 1] = 255; img.data[o + 2] = 255; img.data[o + 3] = 255;
        }
      }
    }
    area = state.current.area;
  }
  ctx.putImageData(img, 0, 0);
  overlay.dataset.maskVersion = String(state.maskVersion);
  overlay.dataset.maskArea = String(area);
}

function drawPrompts(dragBox) {
  const ctx = promptCanvas.getContext('2d');
  ctx.clearRect(0, 0, promptCanvas.width, promptCanvas.height);
  const r = Math.max(4, Math.round(Math.max(state.width, state.height) / 160));
  ctx.lineWidth = Math.max(2, r / 3);
  const box = dragBox || state.box;
  if (box) {
    ctx.strokeStyle = '#ffcc00';
    ctx.setLineDash(dragBox ? [r, r] : []);
    ctx.strokeRect(box[0], box[1], box[2] - box[0], box[3] - box[1]);
    ctx.setLineDash([]);
  }
  for (const p of state.points) {
    ctx.beginPath();
    ctx.arc(p.x, p.y, r, 0, 2 * Math.PI);
    ctx.fillStyle = p.label ? '#1db954' : '#e53935';
    ctx.fill();
    ctx.strokeStyle = '#fff';
    ctx.stroke();
  }
}

function showScores(masks, best) {
  $('scores').innerHTML = '';
  masks.forEach((m, i) => {
    const d = document.createElement('div');
    d.textContent = `mask ${i}: score ${m.score.toFixed(3)}, area ${m.area}`;
    if (i === best) d.className = 'best';
    $('scores').appendChild(d);
  });
}

// ---- image and embedding ----

function setCanvasSize(w, h) {
  for (const c of [imageCanvas, overlay, promptCanvas]) { c.width = w; c.height = h; }
}

async function openImage(file) {
  if (!file) return;
  state.seq++;
  Object.assign(state, { embeddingId: null, points: [], box: null, actions: [], current: null, kept: [] });
  state.fileName = file.name || 'image.png';
  setState('embedding');
  enable(false);
  status('Loading image…');
  let bitmap;
  try {
    bitmap = await createImageBitmap(file);
  } catch (e) {
    setState('empty');
    return status(`Cannot open ${state.fileName}: not an image this browser can read.`, true);
  }
  state.width = bitmap.width; state.height = bitmap.height;
  setCanvasSize(bitmap.width, bitmap.height);
  imageCanvas.getContext('2d').drawImage(bitmap, 0, 0);
  drawOverlay(); drawPrompts();
  // PNG and JPEG go as they are; anything else as a PNG of what the browser shows.
  state.bytes = /^image\/(png|jpeg)$/.test(file.type) ? file : await canvasPng();
  await embed();
}

function canvasPng() {
  return new Promise((resolve) => imageCanvas.toBlob(resolve, 'image/png'));
}

async function embed() {
  status('Computing the image embedding (once per image)…');
  const t0 = performance.now();
  try {
    let r = await api('/v1/embed', { method: 'POST', headers: { 'Content-Type': state.bytes.type || 'image/png' }, body: state.bytes });
    if (r.width !== state.width || r.height !== state.height) {
      // The browser applied a rotation (EXIF) that the server does not: send the pixels shown.
      state.bytes = await canvasPng();
      r = await api('/v1/embed', { method: 'POST', headers: { 'Content-Type': 'image/png' }, body: state.bytes });
    }
    state.embeddingId = r.embedding_id;
    setState('ready');
    enable(true);
    status(`Embedding ready${r.cached ? ' (cached)' : ''} in ${Math.round(performance.now() - t0)} ms. Click on an object.`);
  } catch (e) {
    setState('error');
    status(`Embedding failed: ${e.message}`, true);
  }
}

// ---- segmentation ----

async function segment() {
  if (!state.embeddingId) return;
  const seq = ++state.seq;
  if (!state.points.length && !state.box) {
    state.current = null; state.maskVersion++;
    drawOverlay(); showScores([], -1);
    return status('No prompts.');
  }
  const req = {
    embedding_id: state.embeddingId,
    points: state.points.map((p) => [p.x, p.y]),
    labels: state.points.map((p) => p.label),
    // One point alone is ambiguous: ask for three masks and take the best (as the reference advises).
    multimask: state.points.length === 1 && !state.box,
  };
  if (state.box) req.box = state.box;
  // Refining an object: the last answer's low-res logits guide the next one (not after an undo).
  if (state.current && state.actions.length > 1 && state.lastActionAdded) req.mask_input_id = state.current.maskInputId;
  setState('segmenting');
  const t0 = performance.now();
  try {
    const r = await api('/v1/segment', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(req) });
    if (seq !== state.seq) return;  // a newer action is on its way
    const m = r.masks[r.best];
    state.current = { rle: m.segmentation, mask: rleDecode(m.segmentation), score: m.score, bbox: m.bbox, area: m.area, maskInputId: m.mask_input_id };
    state.maskVersion++;
    drawOverlay();
    showScores(r.masks, r.best);
    setState('ready');
    status(`Mask updated in ${Math.round(performance.now() - t0)} ms (decode ${r.timings_ms.decode.toFixed(1)} ms).`);
  } catch (e) {
    if (seq !== state.seq) return;
    if (/unknown embedding_id/.test(e.message)) {  // evicted from the server's cache: embed again
      await embed();
      return segment();
    }
    setState('ready');
    status(`Segmentation failed: ${e.message}`, true);
  }
}

function imagePoint(ev) {
  const rect = promptCanvas.getBoundingClientRect();
  const x = ((ev.clientX - rect.left) / rect.width) * state.width;
  const y = ((ev.clientY - rect.top) / rect.height) * state.height;
  return [Math.min(Math.max(x, 0), state.width), Math.min(Math.max(y, 0), state.height)];
}

let drag = null;  // {start: [x, y], button, moved}
promptCanvas.addEventListener('contextmenu', (ev) => ev.preventDefault());
promptCanvas.addEventListener('mousedown', (ev) => {
  if (!state.embeddingId) return;
  drag = { start: imagePoint(ev), button: ev.button, moved: false, x: ev.clientX, y: ev.clientY };
});
promptCanvas.addEventListener('mousemove', (ev) => {
  if (!drag || drag.button !== 0) return;
  if (Math.hypot(ev.clientX - drag.x, ev.clientY - drag.y) > 5) drag.moved = true;
  if (drag.moved) {
    const [x, y] = imagePoint(ev);
    drawPrompts([Math.min(drag.start[0], x), Math.min(drag.start[1], y), Math.max(drag.start[0], x), Math.max(drag.start[1], y)]);
  }
});
window.addEventListener('mouseup', (ev) => {
  if (!drag) return;
  const d = drag;
  drag = null;
  const [x, y] = imagePoint(ev);
  if (d.moved && d.button === 0) {
    state.box = [Math.min(d.start[0], x), Math.min(d.start[1], y), Math.max(d.start[0], x), Math.max(d.start[1], y)];
    state.actions.push('box');
  } else if (!d.moved && (d.button === 0 || d.button === 2)) {
    state.points.push({ x: d.start[0], y: d.start[1], label: d.button === 2 ? 0 : 1 });
    state.actions.push('point');
  } else {
    return drawPrompts();
  }
  state.lastActionAdded = true;
  drawPrompts();
  segment();
});

function undo() {
  const a = state.actions.pop();
  if (a === 'point') state.points.pop();
  else if (a === 'box') state.box = null;
  state.lastActionAdded = false;
  drawPrompts();
  segment();
}
function clearPrompts() {
  state.points = []; state.box = null; state.actions = [];
  drawPrompts();
  segment();
}
function keep() {
  if (!state.current) return;
  const i = state.kept.length;
  state.kept.push({ ...state.current, color: colorOf(i) });
  const li = document.createElement('li');
  li.innerHTML = `<span style="background:${colorOf(i)}"></span>area ${state.current.area}, score ${state.current.score.toFixed(3)}`;
  $('kept').appendChild(li);
  state.current = null;
  clearPrompts();
}

async function everything() {
  status('Segmenting everything (a 16x16 grid of points; this takes a while on a CPU)…');
  setState('segmenting');
  $('everything').disabled = true;
  try {
    const r = await api('/v1/everything?points_per_side=16', { method: 'POST', headers: { 'Content-Type': state.bytes.type || 'image/png' }, body: state.bytes });
    r.masks.forEach((m) => {
      const i = state.kept.length;
      state.kept.push({ rle: m.segmentation, mask: rleDecode(m.segmentation), score: m.predicted_iou, bbox: m.bbox, area: m.area, color: colorOf(i) });
    });
    state.maskVersion++;
    drawOverlay();
    status(`${r.masks.length} masks from segment everything.`);
  } catch (e) {
    status(`Segment everything failed: ${e.message}`, true);
  } finally {
    setState('ready');
    $('everything').disabled = false;
  }
}

// ---- downloads ----

function download(blob, name) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function stem() { return state.fileName.replace(/\.[^.]*$/, ''); }

function allMasks() { return state.kept.concat(state.current ? [state.current] : []); }

// A label image: background 0, mask i (kept ones first, the current one last) gray level
// 255 * (i + 1) / n, so that one mask downloads as a plain 0/255 mask.
function downloadPng() {
  const masks = allMasks();
  if (!masks.length) return status('No mask to download yet.', true);
  const c = document.createElement('canvas');
  c.width = state.width; c.height = state.height;
  const ctx = c.getContext('2d');
  const img = ctx.createImageData(state.width, state.height);
  masks.forEach((m, i) => {
    const v = Math.round((255 * (i + 1)) / masks.length);
    for (let p = 0; p < m.mask.length; p++) if (m.mask[p]) { img.data[4 * p] = img.data[4 * p + 1] = img.data[4 * p + 2] = v; }
  });
  for (let p = 3; p < img.data.length; p += 4) img.data[p] = 255;
  ctx.putImageData(img, 0, 0);
  c.toBlob((b) => download(b, `${stem()}_masks.png`), 'image/png');
}

function downloadCoco() {
  const masks = allMasks();
  if (!masks.length) return status('No mask to download yet.', true);
  const coco = {
    images: [{ id: 1, file_name: state.fileName, width: state.width, height: state.height }],
    categories: [{ id: 1, name: 'object' }],
    annotations: masks.map((m, i) => ({
      id: i + 1, image_id: 1, category_id: 1, iscrowd: 0,
      segmentation: m.rle, area: m.area, bbox: m.bbox, score: m.score,
    })),
  };
  download(new Blob([JSON.stringify(coco)], { type: 'application/json' }), `${stem()}_coco.json`);
}

// ---- wiring ----

$('file').addEventListener('change', (ev) => openImage(ev.target.files[0]));
$('undo').addEventListener('click', undo);
$('clear').addEventListener('click', clearPrompts);
$('keep').addEventListener('click', keep);
$('everything').addEventListener('click', everything);
$('download-png').addEventListener('click', downloadPng);
$('download-coco').addEventListener('click', downloadCoco);
document.addEventListener('keydown', (ev) => {
  if (!state.embeddingId) return;
  if (ev.key === 'Escape') clearPrompts();
  else if (ev.key === 'Enter') keep();
  else if (ev.key === 'z' && (ev.ctrlKey || ev.metaKey)) undo();
});
document.addEventListener('dragover', (ev) => ev.preventDefault());
document.addEventListener('drop', (ev) => {
  ev.preventDefault();
  if (ev.dataTransfer.files.length) openImage(ev.dataTransfer.files[0]);
});

api('/v1/health').then((h) => {
  $('model').textContent = `model ${h.model} (${h.fingerprint}) on ${h.device}`;
  if (!h.everything) $('everything').title = 'Not available in this build';
  state.everythingAvailable = h.everything;
}).catch(() => status('The server does not answer /v1/health.', true));
