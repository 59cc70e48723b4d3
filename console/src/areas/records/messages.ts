import { defineMessages } from '../../lib/i18n.tsx';

export const messages = defineMessages(
  {
    nav: 'Records',
    title: 'Records',
    tableLabel: 'Records',
    name: 'Name',
    entity: 'Entity',
    source: 'Source',
    stage: 'Stage',
    pipeline: 'Pipeline',
    created: 'Created',
    updated: 'Updated',
    email: 'Email',
  },
  {
    nav: 'Datensätze',
    title: 'Datensätze',
    tableLabel: 'Datensätze',
    name: 'Name',
    entity: 'Entität',
    source: 'Quelle',
    stage: 'Phase',
    pipeline: 'Pipeline',
    created: 'Erstellt',
    updated: 'Geändert',
    email: 'E-Mail',
  },
);
