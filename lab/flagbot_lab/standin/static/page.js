// The stand-in's page: poll for changes (short backoff), send what is typed, click buttons.
// Everything goes through the stand-in (/page/*), which signs the requests to the bot as Slack does.
(() => {
  const body = document.body;
  const view = {channel: body.dataset.channel, user: body.dataset.user, thread: body.dataset.thread || ''};
  let etag = body.dataset.etag;
  let delay = 300;
  let timer = null;
  const FAST = 300, SLOW = 3000;

  function atBottom(log) { return log.scrollHeight - log.scrollTop - log.clientHeight < 40; }
  function fill(id, html) {
    const log = document.getElementById(id);
    if (!log || html === null) return;
    const stick = atBottom(log);
    log.innerHTML = html;
    if (stick) log.scrollTop = log.scrollHeight;
  }
  function schedule(ms) { clearTimeout(timer); timer = setTimeout(poll, ms); }
  async function poll() {
    const url = new URL('/page/view', location.href);
    url.search = new URLSearchParams({...view, have: etag}).toString();
    try {
      const answer = await fetch(url, {cache: 'no-store'});
      if (answer.status === 200) {
        const shown = await answer.json();
        etag = shown.etag;
        body.dataset.etag = etag;
        fill('channel-log', shown.channel);
        fill('thread-log', shown.thread);
        delay = FAST;
      } else {
        delay = Math.min(delay * 1.5, SLOW);
      }
    } catch (err) {
      delay = SLOW;
    }
    schedule(delay);
  }
  function notice(pane, text, isError) {
    const el = pane && pane.querySelector('.notice');
    if (!el) return;
    el.textContent = text;
    el.classList.toggle('err', !!isError);
  }
  function said(answer) {
    if (answer.error) return [answer.error, true];
    if (answer.status && answer.status !== 200) return [`the bot answered HTTP ${answer.status}: ${answer.body || ''}`, true];
    return ['', false];
  }
  async function post(path, fields) {
    const form = new FormData();
    for (const [key, value] of Object.entries(fields)) form.set(key, value);
    const answer = await fetch(path, {method: 'POST', body: form});
    try { return await answer.json(); } catch (err) { return {error: `HTTP ${answer.status}`}; }
  }

  document.addEventListener('submit', async (event) => {
    const form = event.target.closest('form.composer');
    if (!form) return;
    event.preventDefault();
    const input = form.querySelector('input[name=text]');
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    const pane = form.closest('.pane');
    notice(pane, 'sending…', false);
    const answer = await post('/page/send', {text, channel: view.channel, user: view.user, thread_ts: form.dataset.thread || ''});
    notice(pane, ...said(answer));
    schedule(50);
  });

  async function click(button) {
    const msg = button.closest('.msg');
    const pane = button.closest('.pane');
    button.classList.add('busy');
    notice(pane, '', false);
    const answer = await post('/page/click', {channel: msg.dataset.channel, ts: msg.dataset.ts, action_id: button.dataset.action, user: view.user});
    button.classList.remove('busy');
    notice(pane, ...said(answer));
    schedule(50);
  }

  const dialog = document.getElementById('confirm');
  let pending = null;
  document.addEventListener('click', (event) => {
    const button = event.target.closest('button.bk-btn');
    if (!button || button.disabled) return;
    if (button.dataset.confirm) {
      const confirm = JSON.parse(button.dataset.confirm);
      dialog.querySelector('h4').textContent = confirm.title || 'Are you sure?';
      dialog.querySelector('p').textContent = confirm.text || '';
      dialog.querySelector('.ok').textContent = confirm.confirm || 'Yes';
      dialog.querySelector('.deny').textContent = confirm.deny || 'Cancel';
      pending = button;
      dialog.showModal();
      return;
    }
    click(button);
  });
  dialog.querySelector('.ok').addEventListener('click', () => { dialog.close(); if (pending) click(pending); pending = null; });
  dialog.querySelector('.deny').addEventListener('click', () => { dialog.close(); pending = null; });

  document.getElementById('user').addEventListener('change', (event) => {
    const url = new URL(location.href);
    url.searchParams.set('user', event.target.value);
    location.assign(url);
  });
  for (const log of document.querySelectorAll('.log')) log.scrollTop = log.scrollHeight;
  schedule(FAST);
})();
