// Form fields with a visible label, an optional description and the error text under them.
import type { ReactNode } from 'react';
import {
  TextField as AriaTextField,
  Button,
  FieldError,
  Input,
  Label,
  ListBox,
  ListBoxItem,
  Popover,
  Select,
  SelectValue,
  Text,
  TextArea,
} from 'react-aria-components';

interface CommonProps {
  label: string;
  description?: ReactNode;
  /** The error to show (from the service or the form); the field is marked invalid. */
  error?: string | null;
  isRequired?: boolean;
  isDisabled?: boolean;
  isReadOnly?: boolean;
  className?: string;
  name?: string;
}

export interface TextFieldProps extends CommonProps {
  value: string;
  onChange(value: string): void;
  type?: 'text' | 'email' | 'password' | 'search' | 'tel' | 'url' | 'date' | 'datetime-local' | 'number';
  autoComplete?: string;
  multiline?: boolean;
  placeholder?: string;
  autoFocus?: boolean;
  inputMode?: 'text' | 'email' | 'numeric' | 'decimal' | 'tel' | 'search' | 'url';
}

export function TextField(props: TextFieldProps) {
  const { label, description, error, multiline, placeholder, autoFocus, inputMode, ...rest } = props;
  return (
    <AriaTextField
      {...rest}
      className={`field ${props.className ?? ''}`}
      isInvalid={Boolean(error)}
      validationBehavior="aria"
    >
      <Label className="label">{label}</Label>
      {multiline ? (
        <TextArea placeholder={placeholder} autoFocus={autoFocus} rows={4} />
      ) : (
        <Input placeholder={placeholder} autoFocus={autoFocus} inputMode={inputMode} />
      )}
      {description ? <Text slot="description">{description}</Text> : null}
      <FieldError>{error}</FieldError>
    </AriaTextField>
  );
}

export interface SelectOption {
  id: string;
  label: string;
}

export interface SelectFieldProps extends CommonProps {
  value: string | null;
  onChange(value: string): void;
  options: readonly SelectOption[];
  placeholder?: string;
}

export function SelectField(props: SelectFieldProps) {
  const { label, description, error, options, value, onChange, placeholder, ...rest } = props;
  return (
    <Select
      {...rest}
      className={`field ${props.className ?? ''}`}
      selectedKey={value}
      onSelectionChange={(key) => onChange(String(key))}
      isInvalid={Boolean(error)}
      validationBehavior="aria"
      placeholder={placeholder}
    >
      <Label className="label">{label}</Label>
      <Button className="select-button">
        <SelectValue />
        <span aria-hidden="true">▾</span>
      </Button>
      {description ? <Text slot="description">{description}</Text> : null}
      <FieldError>{error}</FieldError>
      <Popover className="popover">
        <ListBox className="listbox" items={options}>
          {(option) => (
            <ListBoxItem className="listbox-item" id={option.id} textValue={option.label}>
              {option.label}
            </ListBoxItem>
          )}
        </ListBox>
      </Popover>
    </Select>
  );
}
