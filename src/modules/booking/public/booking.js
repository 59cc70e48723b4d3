// The booking page with JavaScript: the browser's time zone is preselected, and slots of other
// zones and days are fetched from /api/v1/booking/slots without reloading the page. Booking
// itself stays the page's plain form post, so that the page works the same without it.
(() => {
  const container = document.getElementById('slots');
  const zoneForm = document.getElementById('zone-form');
  const select = document.getElementById('tz');
  const bookForm = document.getElementById('book-form');
  const nav = document.getElementById('week-nav');
  if (!container || !zoneForm || !select || !bookForm || !nav) return;
  const token = container.dataset.token;
  const state = { zone: container.dataset.zone, week: container.dataset.week };

  /** YYYY-MM-DD of an instant in a zone. */
  const localDate = (date, zone) =>
    new Intl.DateTimeFormat('en-CA', {
      timeZone: zone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    }).format(date);
  /** A calendar date plus days (date arithmetic only, no time zone involved). */
  const addDays = (isoDate, days) => {
    const [y, m, d] = isoDate.split('-').map(Number);
    return new Date(Date.UTC(y, m - 1, d + days)).toISOString().slice(0, 10);
  };
  const dayLabel = (date, zone) =>
    new Intl.DateTimeFormat('en-GB', {
      timeZone: zone,
      weekday: 'long',
      day: 'numeric',
      month: 'long',
    }).format(date);
  const clock = (date, zone) =>
    new Intl.DateTimeFormat('en-GB', {
      timeZone: zone,
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    }).format(date);
  /** HH:mm, with the zone's short name when the clock shows that time twice that night (as the page does). */
  const timeLabel = (date, zone) => {
    const time = clock(date, zone);
    const repeated = [30, 60].some((minutes) =>
      [-1, 1].some((sign) => clock(new Date(date.getTime() + sign * minutes * 60_000), zone) === time),
    );
    if (!repeated) return time;
    const name = new Intl.DateTimeFormat('en-GB', { timeZone: zone, timeZoneName: 'short' })
      .formatToParts(date)
      .find((part) => part.type === 'timeZoneName');
    return name ? `${time} ${name.value}` : time;
  };

  function element(tag, attributes, text) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function render(slots) {
    const days = new Map();
    const last = addDays(state.week, 6);
    for (const slot of slots) {
      const start = new Date(slot.starts_at);
      const date = localDate(start, state.zone);
      if (date < state.week || date > last) continue;
      if (!days.has(date)) days.set(date, []);
      days.get(date).push(start);
    }
    container.replaceChildren();
    if (days.size === 0) {
      container.append(element('p', { id: 'no-slots' }, 'No free times in these days. Try the next days.'));
      return;
    }
    for (const starts of days.values()) {
      const fieldset = element('fieldset', {});
      fieldset.append(element('legend', {}, dayLabel(starts[0], state.zone)));
      const list = element('ul', { class: 'slots' });
      for (const start of starts) {
        const id = `slot-${start.getTime()}`;
        const item = element('li', {});
        item.append(
          element('input', {
            type: 'radio',
            name: 'starts_at',
            id,
            value: start.toISOString(),
            required: '',
          }),
          element('label', { for: id }, timeLabel(start, state.zone)),
        );
        list.append(item);
      }
      fieldset.append(list);
      container.append(fieldset);
    }
  }

  function renderNav() {
    const today = localDate(new Date(), state.zone);
    nav.replaceChildren();
    if (state.week > today) {
      const earlier = element('a', { id: 'earlier', href: '#' }, 'Earlier days');
      earlier.addEventListener('click', (event) => {
        event.preventDefault();
        const week = addDays(state.week, -7);
        state.week = week < today ? today : week;
        void load();
      });
      nav.append(earlier);
    }
    const later = element('a', { id: 'later', href: '#' }, 'Later days');
    later.addEventListener('click', (event) => {
      event.preventDefault();
      state.week = addDays(state.week, 7);
      void load();
    });
    nav.append(later);
  }

  async function load() {
    // A day on either side: local days of any zone fall inside, and the rendering keeps the week.
    const from = addDays(state.week, -1);
    const to = addDays(state.week, 8);
    const params = new URLSearchParams({ token, from, to });
    container.setAttribute('aria-busy', 'true');
    try {
      const response = await fetch(`/api/v1/booking/slots?${params}`, {
        headers: { accept: 'application/json' },
      });
      if (!response.ok) {
        // The link was used or expired meanwhile: the page says so.
        window.location.reload();
        return;
      }
      const body = await response.json();
      render(body.slots);
      renderNav();
      bookForm.querySelector('input[name="tz"]').value = state.zone;
      container.dataset.zone = state.zone;
      container.dataset.week = state.week;
      container.dataset.loaded = 'true';
    } finally {
      container.removeAttribute('aria-busy');
    }
  }

  zoneForm.addEventListener('submit', (event) => {
    event.preventDefault();
    state.zone = select.value;
    void load();
  });
  select.addEventListener('change', () => {
    state.zone = select.value;
    void load();
  });

  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const offered = [...select.options].some((option) => option.value === browserZone);
  if (container.dataset.zoneChosen !== 'true' && offered && browserZone !== state.zone) {
    select.value = browserZone;
    state.zone = browserZone;
  }
  void load();
})();
