/** The success envelope every endpoint answers with. */
export function success<T>(data: T): { response_code: '001'; response_text: 'Success'; data: T } {
  return { response_code: '001', response_text: 'Success', data }
}
