// The teaching page: draws the camera picture with the objects found, lets a person choose one and
// name it, and shows what the learner knows. Everything arrives over one websocket; actions are JSON
// POSTs. Text from the robot is only ever set with textContent (never parsed as HTML).
"use strict";

const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const canvas = $("camera");
const ctx = canvas.getContext("2d");
let frameMeta = null;      // detections of the picture being received
let objects = [];          // detections drawn now
let detections = "fresh";  // fresh: made on this picture; late: the newest seen, older; none: none come
let detectionsAge = 0;
let picture = null;        // ImageBitmap drawn now
let selection = null;      // {trackId} or {box: [x, y, w, h]}
let drag = null;
let state = null;
let socket = null;
let retryMs = 500;
let highlight = null;      // the object the last teach used: {trackId, box, label, until}
let lastTeachTime = null;

function headers() {
  const h = {"Content-Type": "application/json"};
  if (token) h["X-Access-Token"] = token;
  return h;
}

async function post(path, body) {
  let res;
  try {
    res = await fetch(path, {method: "POST", headers: headers(), body: JSON.stringify(body)});
  } catch (e) {
    return {ok: false, message: "the page lost its connection to the robot; trying again…"};
  }
  try {
    return await res.json();
  } catch (e) {
    return {ok: false, message: `the robot answered ${res.status} ${res.statusText}`};
  }
}

function say(text, ok) {
  const m = $("message");
  m.textContent = text;
  m.className = "message " + (ok ? "ok" : "bad");
}

// ------------------------------------------------------------------ connection
function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const q = token ? "?token=" + encodeURIComponent(token) : "";
  socket = new WebSocket(`${proto}//${location.host}/ws${q}`);
  socket.binaryType = "blob";
  let opened = false;
  socket.onopen = () => { opened = true; retryMs = 500; setConnection(true); };
  socket.onclose = () => {
    setConnection(false);
    if (!opened) sayWhyRefused(`/ws${q}`);
    setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, 5000);
  };
  socket.onmessage = (ev) => {
    if (typeof ev.data === "string") {
      const msg = JSON.parse(ev.data);
      if (msg.type === "frame") frameMeta = msg;
      else if (msg.type === "state") showState(msg);
    } else if (frameMeta) {
      const meta = frameMeta;
      frameMeta = null;
      createImageBitmap(ev.data).then((bmp) => showFrame(meta, bmp)).catch(() => {});
    }
  };
}

// A browser hides why a websocket was refused: ask the same address plainly, and show a refusal the
// robot explains (too many pages open) instead of "reconnecting…".
function sayWhyRefused(path) {
  fetch(path, {headers: headers()})
    .then((r) => (r.status === 503 ? r.json() : null))
    .then((b) => { if (b && b.message) $("connection").textContent = b.message; })
    .catch(() => {});
}

function setConnection(on) {
  const c = $("connection");
  c.textContent = on ? "connected" : "reconnecting…";
  c.className = "conn " + (on ? "on" : "off");
}

// ------------------------------------------------------------------ picture and boxes
// the server writes the name as a person is shown it ("mug", "mug?" below UNSURE in
// teaching_page/state.py, "" when unknown): one rule for the page, the debug image and RViz
function caption(o) {
  if (o.shown) return `${o.shown} ${o.confidence.toFixed(2)}`;
  return "What is this?";
}

function showFrame(meta, bmp) {
  if (picture) picture.close();
  picture = bmp;
  objects = meta.objects;
  detections = meta.detections || "fresh";
  detectionsAge = meta.detections_age_s || 0;
  if (canvas.width !== meta.width || canvas.height !== meta.height) {
    canvas.width = meta.width;
    canvas.height = meta.height;
  }
  $("no-picture").hidden = true;
  draw();
  showObjects();
}

function draw() {
  if (!picture) return;
  ctx.drawImage(picture, 0, 0);
  const lw = Math.max(2, canvas.width / 240);
  ctx.font = `${Math.max(11, Math.round(canvas.width / 40))}px system-ui, sans-serif`;
  ctx.textBaseline = "top";
  for (const o of objects) {
    const [x0, y0, x1, y1] = o.box;
    const chosen = selection && selection.trackId === o.id;
    const colour = chosen ? "#2f6fde" : (o.known && o.label ? "#2e9d3a" : "#ff8c00");
    ctx.lineWidth = chosen ? lw * 2 : lw;
    ctx.strokeStyle = colour;
    if (detections === "late") ctx.setLineDash([4, 4]);  // where the object was a moment ago
    ctx.strokeRect(x0, y0, x1 - x0, y1 - y0);
    ctx.setLineDash([]);
    const text = `#${o.id} ${caption(o)}`;
    const tw = ctx.measureText(text).width + 8;
    const th = parseInt(ctx.font, 10) + 6;
    const ty = y0 >= th ? y0 - th : y0;
    ctx.fillStyle = colour;
    ctx.fillRect(x0, ty, tw, th);
    ctx.fillStyle = "#fff";
    ctx.fillText(text, x0 + 4, ty + 3);
  }
  drawHighlight(lw);
  const box = selection && selection.box ? selection.box : (drag && drag.box);
  if (box) {
    ctx.setLineDash([8, 6]);
    ctx.strokeStyle = "#2f6fde";
    ctx.lineWidth = lw;
    ctx.strokeRect(box[0], box[1], box[2], box[3]);
    ctx.setLineDash([]);
  }
}

function drawHighlight(lw) {
  if (!highlight || Date.now() > highlight.until) return;
  const now = objects.find((o) => o.id === highlight.trackId);  // where the taught object is now
  const b = now ? now.box : highlight.box;
  if (!b) return;
  ctx.lineWidth = lw * 3;
  ctx.strokeStyle = "#ffd400";
  ctx.strokeRect(b[0] - lw, b[1] - lw, b[2] - b[0] + 2 * lw, b[3] - b[1] + 2 * lw);
  const text = `taught: ${highlight.label}`;
  ctx.fillStyle = "#ffd400";
  const th = parseInt(ctx.font, 10) + 6;
  ctx.fillRect(b[0], b[3], ctx.measureText(text).width + 8, th);
  ctx.fillStyle = "#000";
  ctx.fillText(text, b[0] + 4, b[3] + 3);
}

function showTaught(t) {
  // a teach answer names the object it used; the picture marks it for a few seconds
  if (!t || t.time === lastTeachTime) return;
  const first = lastTeachTime === null;
  lastTeachTime = t.time;
  if (first && Date.now() / 1000 - t.time > 5) return;  // an old answer, from before this page opened
  if (!t.ok || (!t.box && !(t.track_id >= 0))) return;
  highlight = {trackId: t.track_id, box: t.box, label: t.label, until: Date.now() + 5000};
  draw();
  setTimeout(draw, 5100);
}

function toImage(ev) {
  const r = canvas.getBoundingClientRect();
  return [(ev.clientX - r.left) * canvas.width / r.width, (ev.clientY - r.top) * canvas.height / r.height];
}

function objectAt(x, y) {
  let best = null;
  for (const o of objects) {
    const [x0, y0, x1, y1] = o.box;
    if (x >= x0 && x < x1 && y >= y0 && y < y1) {
      const area = (x1 - x0) * (y1 - y0);
      if (!best || area < best.area) best = {o, area};
    }
  }
  return best && best.o;
}

canvas.addEventListener("pointerdown", (ev) => {
  if (!picture) return;
  drag = {start: toImage(ev), box: null};
  canvas.setPointerCapture(ev.pointerId);
});
canvas.addEventListener("pointermove", (ev) => {
  if (!drag) return;
  const [x, y] = toImage(ev);
  const [sx, sy] = drag.start;
  if (Math.abs(x - sx) + Math.abs(y - sy) > 12) {
    const x0 = Math.max(0, Math.min(x, sx)), y0 = Math.max(0, Math.min(y, sy));
    const x1 = Math.min(canvas.width, Math.max(x, sx)), y1 = Math.min(canvas.height, Math.max(y, sy));
    drag.box = [Math.round(x0), Math.round(y0), Math.round(x1 - x0), Math.round(y1 - y0)];
    draw();
  }
});
canvas.addEventListener("pointerup", (ev) => {
  if (!drag) return;
  const d = drag;
  drag = null;
  if (d.box && d.box[2] > 4 && d.box[3] > 4) {
    choose({box: d.box});
    return;
  }
  const [x, y] = toImage(ev);
  const o = objectAt(x, y);
  if (o) choose({trackId: o.id});
  else say("No object there: tap inside a box, or drag a box around the object.", false);
});

function choose(sel) {
  selection = sel;
  const name = $("name");
  name.disabled = false;
  $("teach").disabled = false;
  showSelected();
  say("", true);
  name.focus();
  draw();
  showObjects();
}

function showObjects() {
  const ul = $("objects");
  ul.replaceChildren();
  const note = document.createElement("li");
  note.className = "note";
  if (detections === "late") {
    note.textContent = `The robot is busy: these objects were found ${detectionsAge.toFixed(0)} s ago.`;
    ul.appendChild(note);
  } else if (detections === "waiting") {
    note.textContent = "Looking for objects…";
    ul.appendChild(note);
  } else if (detections === "none") {
    note.textContent = "No object detections arrive: is the learner running, with depth for object detection?";
    ul.appendChild(note);
  } else if (!objects.length) {
    note.textContent = "No object found in the picture.";
    ul.appendChild(note);
  }
  for (const o of objects) {
    const li = document.createElement("li");
    const unknown = !(o.known && o.label);
    li.className = (unknown ? "unknown" : "") + (selection && selection.trackId === o.id ? " selected" : "");
    const span = document.createElement("span");
    span.className = "grow";
    span.textContent = `#${o.id} ` + caption(o);
    const b = document.createElement("button");
    b.className = "small";
    b.type = "button";
    b.textContent = unknown ? "Name it" : "Correct";
    b.addEventListener("click", () => choose({trackId: o.id}));
    li.append(span, b);
    ul.appendChild(li);
  }
  showSelected();
}

function showSelected() {
  // the heading follows the chosen object: it says "left the view" only while a fresh picture lacks it
  if (!selection) { $("selected").textContent = "No object chosen"; return; }
  if (selection.trackId === undefined) {
    $("selected").textContent = "The object in your box: What is this?";
    return;
  }
  const o = objects.find((x) => x.id === selection.trackId);
  if (!o && detections === "fresh") {
    $("selected").textContent = `Object #${selection.trackId} left the view: choose it again`;
  } else if (o && o.known && o.label) {
    $("selected").textContent = `Object #${selection.trackId}: I think it is “${o.label}”`;
  } else {
    $("selected").textContent = `Object #${selection.trackId}: What is this?`;
  }
}

// ------------------------------------------------------------------ actions
$("teach-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  if (!selection) { say("Choose an object first: tap it in the picture.", false); return; }
  const label = $("name").value;
  const body = selection.trackId !== undefined ? {label, track_id: selection.trackId} : {label, box: selection.box};
  $("teach").disabled = true;
  say(`Learning “${label.trim().slice(0, 40)}”…`, true);
  const res = await post("/api/teach", body);
  $("teach").disabled = false;
  say(res.message, res.ok);
  if (res.ok) {
    $("name").value = "";
    selection = null;
    showSelected();
    draw();
  }
});

async function action(path, body) {
  const res = await post(path, body);
  say(res.message, res.ok);
  return res;
}

function sceneButton(id, path, busy) {
  const b = $(id);
  b.addEventListener("click", async () => {
    const text = b.textContent;
    b.disabled = true;
    b.textContent = busy;
    say(busy, true);
    await action(path, {});
    b.disabled = false;
    b.textContent = text;
    if (state) showScene(state);  // the view may have changed meanwhile
  });
}
sceneButton("place", "/api/place", "Putting objects on the table…");
sceneButton("look", "/api/look", "Turning the camera to the table…");

function showScene(s) {
  // the simulated world offers objects; after "Point at" the hand camera shows a close-up: the way back
  const robot = s.robot || {};
  const view = s.view || {};
  $("place").hidden = !robot.world;
  $("look").hidden = !robot.look;
  $("scene").hidden = !(robot.world || robot.look);
  const away = view.at === "pointing" || view.at === "moved";
  $("view-note").textContent = view.at === "pointing"
    ? `The camera follows the arm: it points at “${view.label}”.`
    : view.at === "moved" ? "The camera moved away from the table." : "";
  $("look").textContent = away ? "Back to the table" : "Look at the table";
}

function classRow(c) {
  const li = document.createElement("li");
  const span = document.createElement("span");
  span.className = "grow";
  span.textContent = `${c.name} (${count(c.num_examples, "view")}, ${count(c.num_clusters, "cluster")})`;
  const mk = (text, cls, fn) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "small " + cls;
    b.textContent = text;
    b.addEventListener("click", fn);
    return b;
  };
  const rename = mk("Rename", "", () => {
    const input = document.createElement("input");
    input.value = c.name;
    input.maxLength = 128;
    input.setAttribute("aria-label", `new name for ${c.name}`);
    const save = mk("Save", "", async () => {
      save.disabled = true;  // the learner retrains and saves: say so at once, not after it answered
      save.textContent = "Renaming…";
      say(`Renaming “${c.name}” to “${input.value.trim().slice(0, 40)}”…`, true);
      await action("/api/rename", {old: c.name, new: input.value});
      input.blur();
      if (state) showState(state);  // the list as the robot now has it
    });
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") save.click(); });
    li.replaceChildren(input, save);
    input.focus();
  });
  const forget = mk("Forget", "danger", () => {
    if (!confirm(`Forget “${c.name}”? Its examples are deleted.`)) return;
    say(`Forgetting “${c.name}”…`, true);
    action("/api/forget", {label: c.name});
  });
  const items = [span, rename, forget];
  if (state && state.robot && state.robot.arm) items.splice(1, 0, mk("Point at", "", () => {
    say(`Pointing at “${c.name}”…`, true);
    action("/api/point", {label: c.name});
  }));
  li.replaceChildren(...items);
  li.dataset.name = c.name;
  return li;
}

// "1 view", "2 views": the first class taught has one of each
function count(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function bytes(n) {
  if (n === undefined) return "–";
  return n > 1048576 ? `${(n / 1048576).toFixed(1)} MB` : `${(n / 1024).toFixed(0)} kB`;
}

function showState(s) {
  const focused = document.activeElement;
  const editing = focused && focused.tagName === "INPUT" && focused.closest("#classes");  // keep a rename being typed
  state = s;
  const st = s.status || {};
  if (!editing) {
    const ul = $("classes");
    ul.replaceChildren(...s.classes.map(classRow));
    if (!s.classes.length) {
      const li = document.createElement("li");
      li.textContent = "Nothing learned yet.";
      ul.appendChild(li);
    }
    const unlisted = (s.classes_total || 0) - s.classes.length;
    if (unlisted > 0) {  // the page lists a bounded number: say so rather than leave classes off unseen
      const li = document.createElement("li");
      li.id = "classes-unlisted";
      li.textContent = `… and ${unlisted} more ${unlisted === 1 ? "class" : "classes"} not listed here (the page lists the first ${s.classes.length})`;
      ul.appendChild(li);
    }
  }
  $("st-classes").textContent = st.num_classes === undefined ? "–" : `${st.num_classes}`;
  $("st-memory").textContent = st.num_clusters === undefined ? "–"
    : `${count(st.num_clusters, "cluster")}, ${bytes(st.memory_bytes)}`;
  $("st-version").textContent = st.model_version === undefined ? "–"
    : `${st.model_version}${st.training ? " (learning…)" : ""}`;
  showScene(s);
  const cam = s.camera || {};
  const wait = $("no-picture");
  if (cam.waiting) {
    wait.textContent = cam.hint || `Waiting for the camera picture on ${cam.topic || "image"}…`;
    wait.hidden = false;
  } else if (picture) {
    wait.hidden = true;
  }
  const t = s.last_teach;
  showTaught(t);
  $("st-last").textContent = t ? `${new Date(t.time * 1000).toLocaleTimeString()}: ${t.message}` : "–";
}

connect();
