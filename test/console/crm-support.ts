// The entity the CRM screens' browser tests work with: a person's name, an email, one pipeline.
export const STAGES = ['New', 'Contacted', 'Won', 'Lost'];

export const DEAL_ENTITY = {
  name: 'Deal',
  fields: [
    { key: 'first_name', label: 'First name', type: 'text', role: 'first_name' },
    { key: 'last_name', label: 'Last name', type: 'text', role: 'last_name' },
    { key: 'email', label: 'Email', type: 'text', format: 'email', role: 'email' },
  ],
  pipelines: [{ name: 'Sales', stages: STAGES }],
};
